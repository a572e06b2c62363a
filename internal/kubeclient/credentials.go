package kubeclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// credentials are how requests say who the user is: a client
// certificate, a bearer token (inline, from a file, or an exec plugin's),
// a username and password, and whom to impersonate.
type credentials struct {
	e    *endpoint
	cert *tls.Certificate // the kubeconfig's own

	mu        sync.Mutex
	fileToken string
	fileRead  time.Time
	plugin    *execCredential // the exec plugin's last answer
}

// tokenFileTTL is how long a token file's contents are used before it is
// read again (a projected service-account token is renewed on disk).
const tokenFileTTL = time.Minute

// headers are the request headers that carry the credentials.
func (c *credentials) headers(ctx context.Context) (http.Header, error) {
	h := http.Header{}
	u := &c.e.User
	token := u.Token
	if u.Exec != nil {
		cred, err := c.execCredential(ctx)
		if err != nil {
			return nil, err
		}
		if cred.Status.Token != "" {
			token = cred.Status.Token
		}
	} else if token == "" && u.TokenFile != "" {
		var err error
		if token, err = c.tokenFromFile(); err != nil {
			return nil, err
		}
	}
	switch {
	case token != "":
		h.Set("Authorization", "Bearer "+token)
	case u.Username != "" || u.Password != "":
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(u.Username+":"+u.Password)))
	}
	if u.Impersonate != "" {
		h.Set("Impersonate-User", u.Impersonate)
		if u.ImpersonateUID != "" {
			h.Set("Impersonate-Uid", u.ImpersonateUID)
		}
		for _, g := range u.ImpersonateGroups {
			h.Add("Impersonate-Group", g)
		}
		for k, vs := range u.ImpersonateUserExtra {
			for _, v := range vs {
				h.Add("Impersonate-Extra-"+k, v)
			}
		}
	}
	return h, nil
}

func (c *credentials) tokenFromFile() (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fileToken != "" && time.Since(c.fileRead) < tokenFileTTL {
		return c.fileToken, nil
	}
	b, err := os.ReadFile(c.e.User.TokenFile)
	if err != nil {
		return "", fmt.Errorf("user: tokenFile: %w", err)
	}
	c.fileToken, c.fileRead = strings.TrimSpace(string(b)), time.Now()
	return c.fileToken, nil
}

// certificate is the client certificate to present: the kubeconfig's,
// or the exec plugin's; none is an empty one.
func (c *credentials) certificate() (*tls.Certificate, error) {
	if c.cert != nil {
		return c.cert, nil
	}
	if c.e.User.Exec != nil {
		cred, err := c.execCredential(context.Background())
		if err != nil {
			return nil, err
		}
		if cred.cert != nil {
			return cred.cert, nil
		}
	}
	return &tls.Certificate{}, nil
}

// expire forgets the exec plugin's answer (the server refused it), and
// says whether there was one to forget.
func (c *credentials) expire() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	had := c.plugin != nil
	c.plugin = nil
	c.fileToken = ""
	return had || c.e.User.TokenFile != ""
}

// execCredential is an exec plugin's answer (ExecCredential).
type execCredential struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Status     struct {
		Token                 string     `json:"token"`
		ClientCertificateData string     `json:"clientCertificateData"`
		ClientKeyData         string     `json:"clientKeyData"`
		ExpirationTimestamp   *time.Time `json:"expirationTimestamp"`
	} `json:"status"`

	cert *tls.Certificate
}

// execCredential runs the exec plugin, or returns its last answer while
// that has not expired.
func (c *credentials) execCredential(ctx context.Context) (*execCredential, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.plugin; p != nil && (p.Status.ExpirationTimestamp == nil || time.Until(*p.Status.ExpirationTimestamp) > 10*time.Second) {
		return p, nil
	}
	cred, err := runPlugin(ctx, c.e)
	if err != nil {
		return nil, err
	}
	c.plugin = cred
	return cred, nil
}

// execAPIVersions are the versions of the plugin protocol kubectl speaks.
var execAPIVersions = []string{"client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"}

func runPlugin(ctx context.Context, e *endpoint) (*execCredential, error) {
	x := e.User.Exec
	fail := func(format string, a ...any) error {
		return fmt.Errorf("user: exec plugin %s: %s", x.Command, fmt.Sprintf(format, a...))
	}
	known := false
	for _, v := range execAPIVersions {
		known = known || x.APIVersion == v
	}
	if !known {
		return nil, fail("apiVersion %q: cove speaks %s", x.APIVersion, strings.Join(execAPIVersions, " and "))
	}
	// As kubectl: the plugin may ask the user (a login, a second factor)
	// when standard input is a terminal, and must not when it is not.
	interactive := x.InteractiveMode != "Never" && term.IsTerminal(int(os.Stdin.Fd()))
	if x.InteractiveMode == "Always" && !interactive {
		return nil, fail("it needs a terminal to ask for your login, and cove's standard input is not one: run it once in a terminal")
	}
	spec := map[string]any{"interactive": interactive}
	if x.ProvideClusterInfo {
		cl := map[string]any{"server": e.Server}
		if e.Cluster.TLSServerName != "" {
			cl["tls-server-name"] = e.Cluster.TLSServerName
		}
		if e.Cluster.InsecureSkipTLSVerify {
			cl["insecure-skip-tls-verify"] = true
		}
		if e.CAData != nil {
			cl["certificate-authority-data"] = base64.StdEncoding.EncodeToString(e.CAData)
		}
		if e.Cluster.ProxyURL != "" {
			cl["proxy-url"] = e.Cluster.ProxyURL
		}
		spec["cluster"] = cl
	}
	info, _ := json.Marshal(map[string]any{"apiVersion": x.APIVersion, "kind": "ExecCredential", "spec": spec})
	cmd := exec.CommandContext(ctx, x.Command, x.Args...)
	cmd.Env = append(os.Environ(), "KUBERNETES_EXEC_INFO="+string(info))
	for _, v := range x.Env {
		cmd.Env = append(cmd.Env, v.Name+"="+v.Value)
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr // its prompts and errors are the user's to read
	if interactive {
		cmd.Stdin = os.Stdin
	}
	if err := cmd.Run(); err != nil {
		if errors.Is(err, exec.ErrNotFound) && x.InstallHint != "" {
			return nil, fail("%v\n%s", err, strings.TrimSpace(x.InstallHint))
		}
		return nil, fail("%v", err)
	}
	var cred execCredential
	if err := json.Unmarshal(out.Bytes(), &cred); err != nil {
		return nil, fail("its answer: %v", err)
	}
	if cred.APIVersion != x.APIVersion || cred.Kind != "ExecCredential" {
		return nil, fail("it answered a %s %s, not the %s ExecCredential asked for", cred.APIVersion, cred.Kind, x.APIVersion)
	}
	s := &cred.Status
	switch {
	case s.ClientCertificateData != "" || s.ClientKeyData != "":
		cert, err := tls.X509KeyPair([]byte(s.ClientCertificateData), []byte(s.ClientKeyData))
		if err != nil {
			return nil, fail("its client certificate: %v", err)
		}
		cred.cert = &cert
	case s.Token == "":
		return nil, fail("its answer has neither a token nor a client certificate")
	}
	return &cred, nil
}
