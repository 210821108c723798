package process

import (
	"bufio"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Image is the container image a job runs in: its steps run in the job's
// sandbox with Rootfs as their root file system, instead of the host's
// directories of Sandbox.ReadOnly. Only a sandboxed executor runs
// images; without a sandbox (no Config.Sandbox, or SandboxAuto without
// bubblewrap) a job with an Image fails as an infrastructure failure.
//
// Inside, the job sees
//
//   - the top-level entries of Rootfs at /, writable: Rootfs is the
//     job's own view of the image, which the job may change and which is
//     thrown away after it (by whoever made it); the sandbox's user must
//     be able to write it. The root directory itself is the sandbox's,
//     read-only: a new top-level entry cannot be made.
//   - its own /proc, /dev, /tmp and /dev/shm, as without an image (the
//     image's /tmp is hidden);
//   - the generated /etc/hosts and, with Sandbox.Network, the host's
//     /etc/resolv.conf, whose mount points are made in the view where the
//     image has none; the image's /etc/passwd and /etc/group stay (an
//     image without an /etc/passwd gets the sandbox's);
//   - its workspace at its host path, as without an image (the
//     predefined CI_PROJECT_DIR and GITHUB_WORKSPACE point there). When
//     that path lies under a directory the image has, the mount point is
//     made in the job's view;
//   - the host's dynamic loader and the libraries the executor's program
//     and prlimit need, read-only under /.cikit/host: the sandbox's
//     supervisor is the executor's own program, and the image's libraries
//     are not the host's.
//
// The job runs as the image's User inside the sandbox's user namespace,
// where uid 0 has no capabilities: on the host it is always the
// sandbox's user (see Sandbox), never root. User is a name or a uid,
// optionally followed by ":" and a group name or gid, as in an image's
// config; a name is looked up in the image's /etc/passwd (and a group in
// its /etc/group). An empty User is root, as for Docker; a name the
// image does not know runs as the sandbox's default user (cikit, uid
// 1000), and the job's log says so.
//
// Each step's environment is the executor's, then the image's Env
// (PATH especially; the image's PATH replaces the host's), then the
// job's, which wins, as on GitLab and GitHub. HOME, USER and LOGNAME are
// the user's from the image's /etc/passwd when it has them, else the
// sandbox's.
//
// A step without a working directory of its own runs in WorkingDir for a
// native job; GitLab and GitHub jobs run in their workspace, which is
// what their scripts expect. The default shell is the image's sh (and
// for a GitHub job, its bash when its PATH has one). A GitLab job's
// steps run as Entrypoint followed by their command line, as GitLab runs
// a job's script through the image's entrypoint; other formats ignore it.
type Image struct {
	// Rootfs is the job's writable view of the image's root file
	// system, a directory. Required.
	Rootfs string
	// Ref and Digest name the image, for the job's log; Digest is
	// reported in Result.ImageDigest.
	Ref, Digest string
	// Env, WorkingDir, User and Entrypoint are those of the image's
	// config, with the job's overrides applied.
	Env        []string
	WorkingDir string
	User       string
	Entrypoint []string
}

// errImageUnsandboxed is why a job with an image fails on an executor
// without a sandbox.
var errImageUnsandboxed = errors.New("this runner cannot run images unsandboxed: running a job in an image needs the bubblewrap sandbox (Config.Sandbox)")

// hostDir is where the sandbox of a job in an image shows what it needs
// of the host, read-only.
const hostDir = "/.cikit/host"

// imagePlan is an Image resolved for one job's sandbox.
type imagePlan struct {
	img      *Image
	uid, gid int    // in the sandbox's user namespace
	user     string // the user's name; "" when the image does not know it
	home     string // the user's home directory; "" when not known
	passwd   bool   // the image has /etc/passwd of its own
	bash     bool   // bash is in the image's PATH
	env      []string
	entries  []rootEntry
	warnings []string
}

// rootEntry is a top-level entry of an image's rootfs: a directory or
// file bound at /name, or a symlink recreated.
type rootEntry struct {
	name, symlink string
}

// defaultImagePath is the PATH of an image whose config sets none, as
// Docker gives it.
const defaultImagePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// planImage resolves img against its rootfs: what it shows at /, who the
// job runs as, whether it has bash.
func planImage(img *Image) (*imagePlan, error) {
	root := img.Rootfs
	if !filepath.IsAbs(root) {
		return nil, fmt.Errorf("image rootfs %q is not an absolute path", root)
	}
	fi, err := os.Lstat(root)
	if err != nil {
		return nil, fmt.Errorf("image rootfs: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("image rootfs %s is not a directory", root)
	}
	im := &imagePlan{img: img, env: slices.Clone(img.Env)}
	des, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("image rootfs: %w", err)
	}
	for _, de := range des {
		name := de.Name()
		switch name {
		case "proc", "dev", "tmp", ".cikit":
			continue // the sandbox's own
		}
		switch t := de.Type(); {
		case t&os.ModeSymlink != 0:
			target, err := os.Readlink(filepath.Join(root, name))
			if err != nil {
				return nil, fmt.Errorf("image rootfs: %w", err)
			}
			im.entries = append(im.entries, rootEntry{name: name, symlink: target})
		case t.IsDir() || t.IsRegular():
			im.entries = append(im.entries, rootEntry{name: name})
		}
	}
	passwd, err := readImageFile(root, "etc/passwd")
	if err != nil {
		return nil, err
	}
	im.passwd = passwd != nil
	if err := im.resolveUser(passwd, root); err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(im.env, func(kv string) bool { return strings.HasPrefix(kv, "PATH=") }) {
		im.env = append(im.env, "PATH="+defaultImagePath)
	}
	im.bash = im.lookPath("bash")
	return im, nil
}

// resolveUser sets the uid and gid the job runs as from the image's User
// and its /etc/passwd and /etc/group.
func (im *imagePlan) resolveUser(passwd []byte, root string) error {
	spec := im.img.User
	if spec == "" {
		spec = "0"
	}
	name, group, hasGroup := strings.Cut(spec, ":")
	im.uid, im.gid = -1, -1
	if n, err := strconv.Atoi(name); err == nil && n >= 0 {
		im.uid, im.gid = n, n
		if e, ok := passwdByUID(passwd, n); ok {
			im.user, im.home, im.gid = e.name, e.home, e.gid
		}
	} else if e, ok := passwdByName(passwd, name); ok {
		im.uid, im.gid, im.user, im.home = e.uid, e.gid, e.name, e.home
	} else {
		im.warnings = append(im.warnings, fmt.Sprintf("the image's user %q is not in its /etc/passwd: the job runs as the sandbox's user %s (uid %d)", name, sandboxUser, sandboxUID))
		im.uid, im.gid = sandboxUID, sandboxUID
		return nil
	}
	if !hasGroup {
		return nil
	}
	if n, err := strconv.Atoi(group); err == nil && n >= 0 {
		im.gid = n
		return nil
	}
	groups, err := readImageFile(root, "etc/group")
	if err != nil {
		return err
	}
	if gid, ok := groupByName(groups, group); ok {
		im.gid = gid
		return nil
	}
	im.warnings = append(im.warnings, fmt.Sprintf("the image's group %q is not in its /etc/group: the job runs with gid %d", group, im.gid))
	return nil
}

// lookPath reports whether name is an executable file in a directory of
// the image's PATH. Symbolic links are not followed (they resolve in the
// image, not on the host): one counts as the program.
func (im *imagePlan) lookPath(name string) bool {
	var p string
	for _, kv := range im.env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			p = v
		}
	}
	for _, dir := range filepath.SplitList(p) {
		if !path.IsAbs(dir) {
			continue
		}
		fi, err := os.Lstat(filepath.Join(im.img.Rootfs, path.Clean(dir), name))
		if err == nil && (fi.Mode()&os.ModeSymlink != 0 || fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0) {
			return true
		}
	}
	return false
}

// maxImageFile bounds what is read of an image's /etc/passwd and
// /etc/group.
const maxImageFile = 1 << 20

// readImageFile returns the content of the regular file rel in the
// rootfs root, nil when there is none. Neither it nor the directories on
// its way may be symbolic links, which would resolve on the host.
func readImageFile(root, rel string) ([]byte, error) {
	p := root
	parts := strings.Split(rel, "/")
	for i, part := range parts {
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("image rootfs: %w", err)
		}
		last := i == len(parts)-1
		if last && !fi.Mode().IsRegular() || !last && !fi.IsDir() {
			return nil, nil
		}
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("image rootfs: %w", err)
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxImageFile))
}

// passwdEntry is a line of an /etc/passwd.
type passwdEntry struct {
	name     string
	uid, gid int
	home     string
}

func passwdEntries(passwd []byte) []passwdEntry {
	var out []passwdEntry
	sc := bufio.NewScanner(strings.NewReader(string(passwd)))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) < 7 {
			continue
		}
		uid, err1 := strconv.Atoi(f[2])
		gid, err2 := strconv.Atoi(f[3])
		if err1 != nil || err2 != nil || uid < 0 || gid < 0 {
			continue
		}
		out = append(out, passwdEntry{name: f[0], uid: uid, gid: gid, home: f[5]})
	}
	return out
}

func passwdByName(passwd []byte, name string) (passwdEntry, bool) {
	for _, e := range passwdEntries(passwd) {
		if e.name == name {
			return e, true
		}
	}
	return passwdEntry{}, false
}

func passwdByUID(passwd []byte, uid int) (passwdEntry, bool) {
	for _, e := range passwdEntries(passwd) {
		if e.uid == uid {
			return e, true
		}
	}
	return passwdEntry{}, false
}

func groupByName(group []byte, name string) (int, bool) {
	sc := bufio.NewScanner(strings.NewReader(string(group)))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) >= 3 && f[0] == name {
			if gid, err := strconv.Atoi(f[2]); err == nil && gid >= 0 {
				return gid, true
			}
		}
	}
	return 0, false
}

// userEnv returns HOME, USER and LOGNAME of the image's user, where the
// image names them, to replace the sandbox's.
func (im *imagePlan) userEnv() map[string]string {
	env := map[string]string{}
	if im.home != "" {
		env["HOME"] = im.home
	}
	if im.user != "" {
		env["USER"], env["LOGNAME"] = im.user, im.user
	}
	return env
}

// hostProgram is a host program as the sandbox of a job in an image runs
// it: argv, the command line that starts it there, and the host files
// the sandbox must show for that, by their path inside.
type hostProgram struct {
	argv  []string
	binds []hostBind
}

// hostBind is a host file shown read-only at a path in the sandbox.
type hostBind struct {
	src, dst string
}

// hostLoaderTimeout bounds asking the host's loader which libraries a
// program needs.
const hostLoaderTimeout = 30 * time.Second

// planHostProgram returns how a sandbox whose root is an image runs the
// host program at file, which the sandbox reaches as inside. A static
// program runs as it is. A dynamic one, whose loader and libraries the
// image may not have, runs under the host's loader (its PT_INTERP) with
// the libraries the host's loader resolves for it (`ld.so --list`),
// shown under hostDir: `<hostDir>/ld.so --library-path <hostDir>/lib
// inside`.
func planHostProgram(file, inside string) (hostProgram, error) {
	interp, err := programInterpreter(file)
	if err != nil {
		return hostProgram{}, err
	}
	if interp == "" {
		return hostProgram{argv: []string{inside}}, nil
	}
	real, err := filepath.EvalSymlinks(interp)
	if err != nil {
		return hostProgram{}, fmt.Errorf("the dynamic loader of %s: %w", file, err)
	}
	libs, err := neededLibraries(interp, file)
	if err != nil {
		return hostProgram{}, err
	}
	loader := path.Join(hostDir, "ld.so")
	libDir := path.Join(hostDir, "lib")
	hp := hostProgram{
		argv:  []string{loader, "--library-path", libDir, inside},
		binds: []hostBind{{real, loader}},
	}
	for _, l := range libs {
		hp.binds = append(hp.binds, hostBind{l.path, path.Join(libDir, l.name)})
	}
	return hp, nil
}

// programInterpreter returns the ELF interpreter (PT_INTERP) of the
// program at file; "" for a static program.
func programInterpreter(file string) (string, error) {
	f, err := elf.Open(file)
	if err != nil {
		return "", fmt.Errorf("reading the program %s: %w", file, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(p.Open(), 4096))
		if err != nil {
			return "", fmt.Errorf("reading the interpreter of %s: %w", file, err)
		}
		return strings.TrimRight(string(b), "\x00"), nil
	}
	return "", nil
}

// library is a shared library a program needs: the name it is loaded by,
// and its file on the host.
type library struct {
	name, path string
}

// neededLibraries asks the host's loader interp which libraries the
// program at file loads, resolved as they would be when it runs on the
// host.
func neededLibraries(interp, file string) ([]library, error) {
	ctx, cancel := context.WithTimeout(context.Background(), hostLoaderTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, interp, "--list", file)
	cmd.Env = []string{}
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("listing the libraries of %s with %s --list: %w", file, interp, err)
	}
	return parseLoaderList(string(out))
}

// parseLoaderList reads `ld.so --list` output: lines "name => path
// (address)" for libraries, others for the loader itself and the vDSO.
func parseLoaderList(out string) ([]library, error) {
	var libs []library
	for _, line := range strings.Split(out, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), " => ")
		if !ok {
			continue
		}
		p, _, _ := strings.Cut(rest, " (")
		if p == "not found" || !filepath.IsAbs(p) {
			return nil, fmt.Errorf("the host's loader does not find the library %s", name)
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil, fmt.Errorf("the library %s: %w", name, err)
		}
		libs = append(libs, library{name: name, path: real})
	}
	return libs, nil
}
