// Package gitdir is the layout of the git repositories under a root
// directory that vcs/local reads and vcs/gitserve serves: repository
// "org/name" is the git repository at <root>/org/name, bare or with a
// work tree, and git runs on it with none of the environment of the
// process.
package gitdir

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Open checks the configuration of a reader of the repositories under
// root with the git binary git (a path, or a name looked up in PATH):
// root must be an existing directory. It returns root made absolute and
// the path of git. Its errors name the Config fields Root and Git.
func Open(root, git string) (absRoot, gitPath string, err error) {
	if root == "" {
		return "", "", errors.New("Config.Root must name the directory the repositories are under")
	}
	absRoot, err = filepath.Abs(root)
	if err != nil {
		return "", "", fmt.Errorf("Config.Root: %w", err)
	}
	if fi, err := os.Stat(absRoot); err != nil {
		return "", "", fmt.Errorf("Config.Root: %w", err)
	} else if !fi.IsDir() {
		return "", "", fmt.Errorf("Config.Root %s is not a directory", absRoot)
	}
	gitPath, err = exec.LookPath(git)
	if err != nil {
		return "", "", fmt.Errorf("Config.Git: %w", err)
	}
	return absRoot, gitPath, nil
}

// Env returns the environment git runs with, then extra: no inherited
// environment, so nothing from the user's configuration, terminal or
// replace refs changes what a repository reads as.
func Env(extra ...string) []string {
	return append([]string{
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=" + os.DevNull,
		"HOME=" + os.DevNull,
		"XDG_CONFIG_HOME=" + os.DevNull,
		"GIT_TERMINAL_PROMPT=0",
		"GIT_NO_REPLACE_OBJECTS=1",
		"LC_ALL=C",
	}, extra...)
}

// CheckRepo accepts "org/name" and deeper, each part letters, digits,
// '.', '_' and '-', not starting with '.' or '-'.
func CheckRepo(repo string) error {
	parts := strings.Split(repo, "/")
	if len(parts) < 2 {
		return fmt.Errorf("repository %q is not org/name", repo)
	}
	for _, part := range parts {
		if part == "" || part[0] == '.' || part[0] == '-' {
			return fmt.Errorf("repository %q has an empty part or one starting with '.' or '-'", repo)
		}
		for _, c := range []byte(part) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
				return fmt.Errorf("repository %q has a character other than letters, digits, '.', '_' and '-'", repo)
			}
		}
	}
	return nil
}

// Find returns the git directory of repo, a name CheckRepo accepts, under
// root: <root>/repo/.git, or <root>/repo itself when it is bare. ok is
// false when there is no repository there.
func Find(root, repo string) (dir string, ok bool) {
	dir = filepath.Join(root, filepath.FromSlash(repo))
	if fi, err := os.Stat(filepath.Join(dir, ".git")); err == nil && fi.IsDir() {
		return filepath.Join(dir, ".git"), true
	}
	if fi, err := os.Stat(filepath.Join(dir, "HEAD")); err == nil && fi.Mode().IsRegular() {
		return dir, true
	}
	return "", false
}
