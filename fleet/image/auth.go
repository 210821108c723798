package image

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

// dockerHub is the registry host go-containerregistry resolves Docker
// Hub references to, and the key Docker writes its credentials under
// in several spellings.
const dockerHub = name.DefaultRegistry

// credentials are the per-registry credentials of a Docker config.json,
// by registry host.
type credentials map[string]authn.AuthConfig

// loadDockerConfig reads the "auths" of a Docker config.json. Credential
// helpers (credsStore, credHelpers) would run programs named by the file
// on the runner; they are refused rather than ignored.
func loadDockerConfig(path string) (credentials, error) {
	if path == "" {
		return credentials{}, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading DockerConfig: %w", err)
	}
	var file struct {
		Auths       map[string]dockerAuth `json:"auths"`
		CredsStore  string                `json:"credsStore"`
		CredHelpers map[string]string     `json:"credHelpers"`
	}
	if err := json.Unmarshal(b, &file); err != nil {
		return nil, fmt.Errorf("DockerConfig %s is not a Docker config.json: %w", path, err)
	}
	if file.CredsStore != "" || len(file.CredHelpers) > 0 {
		return nil, fmt.Errorf("DockerConfig %s names credential helpers, which are not supported: give the credentials in \"auths\"", path)
	}
	creds := credentials{}
	for key, a := range file.Auths {
		cfg := authn.AuthConfig{
			Username:      a.Username,
			Password:      a.Password,
			IdentityToken: a.IdentityToken,
			RegistryToken: a.RegistryToken,
		}
		if a.Auth != "" {
			raw, err := base64.StdEncoding.DecodeString(a.Auth)
			if err != nil {
				return nil, fmt.Errorf("DockerConfig %s: the auth of %q is not base64", path, key)
			}
			user, pass, ok := strings.Cut(string(raw), ":")
			if !ok {
				return nil, fmt.Errorf("DockerConfig %s: the auth of %q is not user:password", path, key)
			}
			cfg.Username, cfg.Password = user, pass
		}
		creds[configHost(key)] = cfg
	}
	return creds, nil
}

type dockerAuth struct {
	Auth          string `json:"auth"`
	Username      string `json:"username"`
	Password      string `json:"password"`
	IdentityToken string `json:"identitytoken"`
	RegistryToken string `json:"registrytoken"`
}

// configHost turns a key of "auths" — a host, a URL, or one of Docker
// Hub's historical names — into the registry host it stands for.
func configHost(key string) string {
	host := key
	if i := strings.Index(host, "://"); i >= 0 {
		host = host[i+3:]
	}
	host, _, _ = strings.Cut(host, "/")
	switch host {
	case "docker.io", "registry-1.docker.io", "index.docker.io":
		return dockerHub
	}
	return host
}

// authenticator picks the credentials for one request to host: the
// job's own when host is the image's registry, else the Docker
// config's, else none. A job's credentials are never sent to a mirror.
func (c credentials) authenticator(host string, job *authn.Basic, origin bool) authn.Authenticator {
	if origin && job != nil {
		return authn.FromConfig(authn.AuthConfig{Username: job.Username, Password: job.Password})
	}
	if cfg, ok := c[host]; ok {
		return authn.FromConfig(cfg)
	}
	return authn.Anonymous
}
