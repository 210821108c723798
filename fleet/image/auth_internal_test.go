package image

import "testing"

func TestConfigHost(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]string{
		"https://index.docker.io/v1/": dockerHub,
		"docker.io":                   dockerHub,
		"registry-1.docker.io":        dockerHub,
		"ghcr.io":                     "ghcr.io",
		"https://ghcr.io":             "ghcr.io",
		"http://127.0.0.1:5000/v2/":   "127.0.0.1:5000",
		"registry.example:8443":       "registry.example:8443",
	} {
		if got := configHost(key); got != want {
			t.Errorf("configHost(%q) = %q, want %q", key, got, want)
		}
	}
}
