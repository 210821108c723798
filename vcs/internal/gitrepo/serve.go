package gitrepo

import "strings"

// IsGitPath reports whether URL path p is a request of git's smart HTTP
// protocol ("/{repo}.git/info/refs", ".../git-upload-pack" or
// ".../git-receive-pack"), which a test forge hands to vcs/gitserve,
// rather than a call of its API.
func IsGitPath(p string) bool {
	for _, part := range []string{"/info/refs", "/git-upload-pack", "/git-receive-pack"} {
		if repo, ok := strings.CutSuffix(p, part); ok {
			return strings.HasSuffix(repo, ".git") && !strings.HasPrefix(p, "/api/") && !strings.HasPrefix(p, "/repos/")
		}
	}
	return false
}
