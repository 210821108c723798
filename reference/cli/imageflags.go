package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet/image"
	"github.com/cikit/cikit/fleet/process"
)

// imageFlagNames are the flags addImageFlags registers, as the errors
// about them name them.
var imageFlagNames = []string{"image-dir", "default-image", "image-for", "host-jobs", "registry-mirror", "docker-config", "insecure-registry", "image-budget", "pull-policy"}

// imageFlags are the flags that say how jobs run in container images,
// the same for `cikit runner` and `cikit run`; only their defaults
// differ.
type imageFlags struct {
	fs           *flag.FlagSet
	run          bool // the defaults of `cikit run`
	dir          string
	defaultImage string
	labels       mapFlag
	host         bool
	mirrors      mapFlag
	dockerConfig string
	insecure     listFlag
	budget       byteSize
	pullPolicy   string
}

// addImageFlags registers the image flags on fs, with the defaults of
// `cikit run` when run is true (a developer's machine: jobs without an
// image run on the host, and images cached are not pulled again) and of
// `cikit runner` otherwise.
func addImageFlags(fs *flag.FlagSet, run bool) *imageFlags {
	f := &imageFlags{fs: fs, run: run, labels: mapFlag{what: "LABEL=IMAGE", unique: true}, mirrors: mapFlag{what: "HOST=MIRROR"}}
	fs.StringVar(&f.dir, "image-dir", "", "the directory of the images jobs run in: their layers and unpacked root file systems\n(default: cikit/images under the user's cache directory)")
	fs.StringVar(&f.defaultImage, "default-image", "", "the image of a job that names none (GitLab's image:, GitHub's container:) and whose runs-on\nlabels -image-for gives none, such as alpine:3.20")
	fs.Var(&f.labels, "image-for", "LABEL=IMAGE: run the jobs that name no image and run on LABEL (runs-on, tags) in IMAGE,\nas act's -P does, such as ubuntu-latest=ubuntu:24.04 (repeatable; a job's first label with an image wins)")
	if run {
		fs.BoolVar(&f.host, "host-jobs", true, "run a job that gets no image (none of its own, no -image-for label, no -default-image) on this\nmachine, outside any image; false fails it")
	} else {
		// Its default depends on -default-image: see images.
		fs.BoolVar(&f.host, "host-jobs", false, "run a job that gets no image (none of its own, no -image-for label, no -default-image) on the\nrunner's host, in its sandbox; false fails it (default: false when -default-image is set, else true)")
	}
	fs.Var(&f.mirrors, "registry-mirror", "HOST=MIRROR: pull images of registry HOST from MIRROR first, such as\nindex.docker.io=mirror.gcr.io (repeatable: mirrors of a host are tried in order, then the host)")
	fs.StringVar(&f.dockerConfig, "docker-config", defaultDockerConfig(), "a Docker config.json whose auths log in to registries (default: $DOCKER_CONFIG/config.json,\nor ~/.docker/config.json, when it exists; \"\" for none)")
	fs.Var(&f.insecure, "insecure-registry", "a registry host reached over plain HTTP, such as localhost:5000 (repeatable)")
	budget := byteSize(image.DefaultBudget)
	fs.Var(&f.budget, "image-budget", fmt.Sprintf("the bytes of image layers the cache keeps before evicting the least recently used, such as 50G\n(default %s)", budget.String()))
	policy := image.PullAlways
	if run {
		policy = image.PullIfNotPresent
	}
	fs.StringVar(&f.pullPolicy, "pull-policy", string(policy), fmt.Sprintf("when a job's image is pulled, unless the job says: %s (ask the registry each time), %s\n(use the image cached, else pull) or %s (use only the image cached)", image.PullAlways, image.PullIfNotPresent, image.PullNever))
	return f
}

// given lists the image flags given on the command line, as -name.
func (f *imageFlags) given() []string {
	var names []string
	f.fs.Visit(func(fl *flag.Flag) {
		if slices.Contains(imageFlagNames, fl.Name) {
			names = append(names, "-"+fl.Name)
		}
	})
	return names
}

// images returns the process.Images the flags give.
func (f *imageFlags) images() (*process.Images, error) {
	switch p := image.PullPolicy(f.pullPolicy); p {
	case image.PullAlways, image.PullIfNotPresent, image.PullNever:
	default:
		return nil, fmt.Errorf("-pull-policy must be %s, %s or %s, not %q", image.PullAlways, image.PullIfNotPresent, image.PullNever, f.pullPolicy)
	}
	host := f.host
	if !f.run && !slices.Contains(f.given(), "-host-jobs") {
		host = f.defaultImage == ""
	}
	dir := f.dir
	if dir == "" {
		dir = defaultImageDir()
	}
	im := &process.Images{
		Pull: image.Config{Dir: dir, Budget: int64(f.budget), DockerConfig: f.dockerConfig,
			Insecure: slices.Clone(f.insecure)},
		Default:    f.defaultImage,
		Host:       host,
		PullPolicy: image.PullPolicy(f.pullPolicy),
	}
	if len(f.labels.values) > 0 {
		im.Labels = map[string]string{}
		for _, kv := range f.labels.values {
			im.Labels[kv[0]] = kv[1]
		}
	}
	if len(f.mirrors.values) > 0 {
		im.Pull.Mirrors = map[string][]string{}
		for _, kv := range f.mirrors.values {
			im.Pull.Mirrors[kv[0]] = append(im.Pull.Mirrors[kv[0]], kv[1])
		}
	}
	return im, nil
}

// imageOf is the image a job of spec runs in under im, "" for none: its
// own, the one of its first runs-on label that has one, the default; as
// process.Executor decides.
func imageOf(im *process.Images, spec *cikit.JobSpec) string {
	if spec.Image != "" {
		return spec.Image
	}
	for _, l := range spec.RunsOn {
		if ref := im.Labels[l]; ref != "" {
			return ref
		}
	}
	return im.Default
}

// defaultImageDir is the image directory of -image-dir's default:
// cikit/images under the user's cache directory.
func defaultImageDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "cikit", "images")
}

// defaultDockerConfig is $DOCKER_CONFIG/config.json, or
// ~/.docker/config.json, when the file exists; "" otherwise.
func defaultDockerConfig() string {
	dir := os.Getenv("DOCKER_CONFIG")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(home, ".docker")
	}
	path := filepath.Join(dir, "config.json")
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	return path
}

// mapFlag is the value of a repeatable KEY=VALUE flag whose keys and
// values must not be empty (-image-for, -registry-mirror), in the order
// given. A unique one refuses a key given twice.
type mapFlag struct {
	what   string // KEY=VALUE as the flag's usage names it
	unique bool
	values [][2]string
}

func (m *mapFlag) String() string {
	if m == nil {
		return ""
	}
	var s []string
	for _, kv := range m.values {
		s = append(s, kv[0]+"="+kv[1])
	}
	return strings.Join(s, ",")
}

func (m *mapFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	k, val = strings.TrimSpace(k), strings.TrimSpace(val)
	if !ok || k == "" || val == "" {
		return fmt.Errorf("want %s, neither of them empty, got %q", m.what, v)
	}
	if m.unique && slices.ContainsFunc(m.values, func(kv [2]string) bool { return kv[0] == k }) {
		return fmt.Errorf("%s is given twice", k)
	}
	m.values = append(m.values, [2]string{k, val})
	return nil
}

// listFlag is the value of a repeatable flag of non-empty words.
type listFlag []string

func (l *listFlag) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(*l, ",")
}

func (l *listFlag) Set(v string) error {
	if v = strings.TrimSpace(v); v == "" {
		return errors.New("must not be empty")
	}
	*l = append(*l, v)
	return nil
}
