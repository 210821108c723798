package process

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/imagetest"
	"github.com/cikit/cikit/internal/testenv"
)

// rootfs makes a small rootfs of files (name → content; a content
// starting with "->" makes a symbolic link to the rest).
func rootfs(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		if target, ok := strings.CutPrefix(body, "->"); ok {
			require.NoError(t, os.Symlink(target, p))
			continue
		}
		require.NoError(t, os.WriteFile(p, []byte(body), 0o755))
	}
	return dir
}

func TestPlanImageUser(t *testing.T) {
	t.Parallel()
	root := rootfs(t, map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\nci:x:1000:1001:ci:/home/ci:/bin/sh\nbroken:x:y\n",
		"etc/group":  "root:x:0:\nci:x:1001:\nstaff:x:50:\n",
	})
	for _, tc := range []struct {
		user      string
		uid, gid  int
		name, env string
		warning   string
	}{
		{user: "", uid: 0, gid: 0, name: "root", env: "/root"},
		{user: "ci", uid: 1000, gid: 1001, name: "ci", env: "/home/ci"},
		{user: "1000", uid: 1000, gid: 1001, name: "ci", env: "/home/ci"},
		{user: "ci:staff", uid: 1000, gid: 50, name: "ci", env: "/home/ci"},
		{user: "5:7", uid: 5, gid: 7},
		{user: "ci:nogroup", uid: 1000, gid: 1001, name: "ci", env: "/home/ci", warning: `the image's group "nogroup" is not in its /etc/group`},
		{user: "nobody-here", uid: sandboxUID, gid: sandboxUID, warning: `the image's user "nobody-here" is not in its /etc/passwd: the job runs as the sandbox's user cikit (uid 1000)`},
	} {
		t.Run(strconv.Quote(tc.user), func(t *testing.T) {
			im, err := planImage(&Image{Rootfs: root, User: tc.user})
			require.NoError(t, err)
			require.Equal(t, []int{tc.uid, tc.gid}, []int{im.uid, im.gid})
			require.Equal(t, tc.name, im.user)
			require.Equal(t, tc.env, im.home)
			if tc.warning == "" {
				require.Empty(t, im.warnings)
			} else {
				require.Len(t, im.warnings, 1)
				require.Contains(t, im.warnings[0], tc.warning)
			}
		})
	}
}

// TestPlanImageReadsOnlyTheImage: an /etc/passwd that links elsewhere
// (here to the host's) is no passwd of the image's, and the sandbox's own
// is shown instead; a bash symlink counts as bash without being
// followed; an image without PATH gets Docker's default.
func TestPlanImageReadsOnlyTheImage(t *testing.T) {
	t.Parallel()
	root := rootfs(t, map[string]string{
		"etc/passwd":   "->/etc/passwd",
		"usr/bin/bash": "->/nonexistent/bash",
		"lib":          "->usr/lib",
		"tmp/x":        "",
	})
	im, err := planImage(&Image{Rootfs: root, User: "root"})
	require.NoError(t, err)
	require.False(t, im.passwd)
	require.Equal(t, []int{sandboxUID, sandboxUID}, []int{im.uid, im.gid}, "root is not looked up in the host's passwd")
	require.True(t, im.bash)
	require.Contains(t, im.env, "PATH="+defaultImagePath)
	require.Equal(t, []rootEntry{{name: "etc"}, {name: "lib", symlink: "usr/lib"}, {name: "usr"}}, im.entries, "/tmp is the sandbox's")

	im, err = planImage(&Image{Rootfs: root, Env: []string{"PATH=/opt/bin"}})
	require.NoError(t, err)
	require.False(t, im.bash, "bash is not in the image's PATH")

	for _, bad := range []string{"relative/rootfs", filepath.Join(root, "missing"), filepath.Join(root, "tmp", "x")} {
		_, err := planImage(&Image{Rootfs: bad})
		require.Error(t, err, bad)
	}
}

// TestPlanHostProgram: a static program (Debian's busybox) runs as it
// is; a dynamic one (this test binary, with the race detector or cgo)
// runs under the host's loader with its libraries shown under hostDir.
func TestPlanHostProgram(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(imagetest.BusyboxPath); err != nil {
		testenv.ToolUnavailable(t, testenv.Busybox, err)
	}
	hp, err := planHostProgram(imagetest.BusyboxPath, "/inside")
	require.NoError(t, err)
	require.Equal(t, hostProgram{argv: []string{"/inside"}}, hp)

	self := "/proc/" + strconv.Itoa(os.Getpid()) + "/exe"
	interp, err := programInterpreter(self)
	require.NoError(t, err)
	if interp == "" {
		t.Fatal("this test binary is static: build it with the race detector to test a dynamic one")
	}
	hp, err = planHostProgram(self, "/inside")
	require.NoError(t, err)
	require.Equal(t, []string{hostDir + "/ld.so", "--library-path", hostDir + "/lib", "/inside"}, hp.argv)
	require.True(t, slices.ContainsFunc(hp.binds, func(b hostBind) bool { return b.dst == hostDir+"/lib/libc.so.6" }), "%v", hp.binds)
	for _, b := range hp.binds {
		fi, err := os.Lstat(b.src)
		require.NoError(t, err)
		require.True(t, fi.Mode().IsRegular(), "%s is bound as the file itself", b.src)
	}
}

func TestParseLoaderList(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	libc := filepath.Join(dir, "libc-2.36.so")
	require.NoError(t, os.WriteFile(libc, nil, 0o644))
	require.NoError(t, os.Symlink("libc-2.36.so", filepath.Join(dir, "libc.so.6")))
	libs, err := parseLoaderList("\tlinux-vdso.so.1 (0x00007ffd)\n" +
		"\tlibc.so.6 => " + filepath.Join(dir, "libc.so.6") + " (0x00007f19)\n" +
		"\t/lib64/ld-linux-x86-64.so.2 (0x00007f1a)\n")
	require.NoError(t, err)
	require.Equal(t, []library{{name: "libc.so.6", path: libc}}, libs, "the library by the name it is loaded by, its file resolved")
	_, err = parseLoaderList("\tlibmissing.so.1 => not found\n")
	require.ErrorContains(t, err, "does not find the library libmissing.so.1")
}
