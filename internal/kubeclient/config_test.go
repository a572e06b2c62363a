package kubeclient

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// write writes name in dir with text and returns its path.
func write(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLoadReadsAsKubectl reads kubeconfigs as client-go's clientcmd (what
// kubectl reads them with) does, and compares what both make of them:
// the server, the namespace, the credentials and the files they name,
// over several files in $KUBECONFIG, relative paths, a missing file in the
// list, and the context and namespace chosen on the command line.
func TestLoadReadsAsKubectl(t *testing.T) {
	dir := t.TempDir()
	ca := write(t, dir, "pki/ca.crt", "CA PEM")
	write(t, dir, "a/certs/me.crt", "CERT PEM")
	write(t, dir, "a/certs/me.key", "KEY PEM")
	write(t, dir, "b/token", "file-token\n")
	a := write(t, dir, "a/config", `apiVersion: v1
kind: Config
clusters:
- name: one
  cluster: {server: "https://one.example:6443", certificate-authority: `+ca+`, tls-server-name: api.one}
- name: two
  cluster: {server: "https://two.example", insecure-skip-tls-verify: true}
users:
- name: me
  user: {client-certificate: certs/me.crt, client-key: certs/me.key}
contexts:
- name: first
  context: {cluster: one, user: me, namespace: team}
- name: shared
  context: {cluster: one, user: me, namespace: from-a}
`)
	b := write(t, dir, "b/config", `apiVersion: v1
kind: Config
current-context: second
clusters:
- name: one
  cluster: {server: "https://not-this.example"}
- name: three
  cluster: {server: "https://three.example", certificate-authority-data: `+base64.StdEncoding.EncodeToString([]byte("INLINE CA"))+`}
users:
- name: tok
  user: {tokenFile: token}
- name: basic
  user: {username: u, password: p}
contexts:
- name: second
  context: {cluster: two, user: tok}
- name: third
  context: {cluster: three, user: basic, namespace: ns3}
- name: shared
  context: {cluster: three, user: basic, namespace: from-b}
`)
	list := strings.Join([]string{a, filepath.Join(dir, "missing"), b}, string(os.PathListSeparator))
	for _, c := range []struct {
		env string
		o   Options
	}{
		{list, Options{}},                                     // b's current context, a's cluster list first
		{list, Options{Context: "first"}},                     // a relative client certificate
		{list, Options{Context: "third"}},                     // inline CA, basic auth
		{list, Options{Context: "shared"}},                    // the first file's context wins
		{list, Options{Context: "first", Namespace: "other"}}, // the namespace chosen
		{"", Options{Kubeconfig: a, Context: "first"}},        // an explicit file
	} {
		t.Run(fmt.Sprintf("%s/%s", c.o.Context, c.o.Namespace), func(t *testing.T) {
			t.Setenv("KUBECONFIG", c.env)
			e, err := load(c.o)
			if err != nil {
				t.Fatal(err)
			}
			rules := clientcmd.NewDefaultClientConfigLoadingRules()
			rules.ExplicitPath = c.o.Kubeconfig
			over := &clientcmd.ConfigOverrides{CurrentContext: c.o.Context}
			over.Context.Namespace = c.o.Namespace
			cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, over)
			rc, err := cc.ClientConfig()
			if err != nil {
				t.Fatal(err)
			}
			ns, _, err := cc.Namespace()
			if err != nil {
				t.Fatal(err)
			}
			read := func(file string, data []byte) string {
				if data != nil {
					return string(data)
				}
				if file == "" {
					return ""
				}
				b, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				return string(b)
			}
			kubectl := fmt.Sprintf("server %s ns %s ca %q name %q insecure %v cert %q key %q token %q user %q:%q",
				rc.Host, ns, read(rc.CAFile, rc.CAData), rc.ServerName, rc.Insecure, read(rc.CertFile, rc.CertData), read(rc.KeyFile, rc.KeyData),
				strings.TrimSpace(cmp.Or(rc.BearerToken, read(rc.BearerTokenFile, nil))), rc.Username, rc.Password)
			token := e.User.Token
			if e.User.TokenFile != "" {
				b, _ := os.ReadFile(e.User.TokenFile)
				token = strings.TrimSpace(string(b))
			}
			ours := fmt.Sprintf("server %s ns %s ca %q name %q insecure %v cert %q key %q token %q user %q:%q",
				e.Server, e.Namespace, e.CAData, e.Cluster.TLSServerName, e.Cluster.InsecureSkipTLSVerify, e.CertData, e.KeyData, token, e.User.Username, e.User.Password)
			if ours != kubectl {
				t.Errorf("read differently:\n  cove:    %s\n  kubectl: %s", ours, kubectl)
			}
		})
	}
}

// TestLoadSaysWhatIsWrong: a kubeconfig cove cannot use is an error that
// names what is wrong in it.
func TestLoadSaysWhatIsWrong(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ config, context, says string }{
		{`current-context: ""`, "", "no current-context"},
		{`contexts: []`, "nope", `context "nope" does not exist`},
		{"contexts:\n- {name: c, context: {cluster: gone}}\ncurrent-context: c", "", `cluster "gone" does not exist`},
		{"clusters:\n- {name: k, cluster: {server: https://k}}\ncontexts:\n- {name: c, context: {cluster: k, user: who}}\ncurrent-context: c", "", `user "who" does not exist`},
		{"clusters:\n- {name: k, cluster: {server: https://k}}\nusers:\n- {name: u, user: {auth-provider: {name: gcp}}}\ncontexts:\n- {name: c, context: {cluster: k, user: u}}\ncurrent-context: c", "", `auth-provider "gcp" is not supported`},
		{"clusters:\n- {name: k, cluster: {server: https://k, insecure-skip-tls-verify: true, certificate-authority-data: Q0E=}}\ncontexts:\n- {name: c, context: {cluster: k}}\ncurrent-context: c", "", "choose one"},
		{"clusters:\n- {name: k, cluster: {server: https://k, certificate-authority: nothere.crt}}\ncontexts:\n- {name: c, context: {cluster: k}}\ncurrent-context: c", "", "nothere.crt"},
		{"clusters: [", "", "yaml"},
	} {
		p := write(t, dir, "config", c.config)
		_, err := New(Options{Kubeconfig: p, Context: c.context})
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%q: %v, want it to say %q", c.config, err, c.says)
		}
	}
	if _, err := New(Options{Kubeconfig: filepath.Join(dir, "none")}); err == nil || !strings.Contains(err.Error(), "none") {
		t.Errorf("a --kubeconfig that is not there: %v", err)
	}
	t.Setenv("KUBECONFIG", filepath.Join(dir, "none"))
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := New(Options{}); err == nil || !strings.Contains(err.Error(), "no kubeconfig") {
		t.Errorf("no kubeconfig at all: %v", err)
	}
}

// TestExecPluginCredentials: an exec plugin's token goes with each
// request; it is asked again once its answer expires, and once when the
// server refuses it; the plugin is told the API version and whether it
// may ask the user.
func TestExecPluginCredentials(t *testing.T) {
	var refuse atomic.Bool
	var seen atomic.Value
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.Header.Get("Authorization"))
		if refuse.Swap(false) {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"kind":"Status","status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`)
			return
		}
		if r.URL.Path == "/api/v1/namespaces/default/pods/gone" {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"kind":"Status","status":"Failure","message":"pods \"gone\" not found","reason":"NotFound","code":404}`)
			return
		}
		fmt.Fprint(w, `{"ok": true}`)
	}))
	defer srv.Close()
	dir := t.TempDir()
	count := filepath.Join(dir, "count")
	plugin := write(t, dir, "plugin.sh", `#!/bin/sh
echo x >> `+count+`
n=$(wc -l < `+count+`)
case "$KUBERNETES_EXEC_INFO" in *'"apiVersion":"client.authentication.k8s.io/v1"'*'"interactive":false'*) ;; *) echo "bad info: $KUBERNETES_EXEC_INFO" >&2; exit 1 ;; esac
# The first answer has already expired.
if [ "$n" = 1 ]; then exp=2000-01-01T00:00:00Z; else exp=2999-01-01T00:00:00Z; fi
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"t%s-%s","expirationTimestamp":"%s"}}' "$n" "$GREETING" "$exp"
`)
	os.Chmod(plugin, 0o755)
	ca := base64.StdEncoding.EncodeToString(pemOf(t, srv))
	kc := write(t, dir, "config", fmt.Sprintf(`clusters:
- {name: k, cluster: {server: %s, certificate-authority-data: %s}}
users:
- name: u
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1, command: ./plugin.sh, env: [{name: GREETING, value: hi}], interactiveMode: Never}
contexts:
- {name: c, context: {cluster: k, user: u}}
current-context: c
`, srv.URL, ca))
	c, err := New(Options{Kubeconfig: kc})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var out struct{ OK bool }
	for i, want := range []string{"Bearer t1-hi", "Bearer t2-hi", "Bearer t2-hi"} {
		// The first answer has expired by the second request.
		if err := c.Do(ctx, http.MethodGet, "/api/v1/namespaces", nil, nil, &out); err != nil || !out.OK {
			t.Fatalf("request %d: %v %v", i, err, out)
		}
		if got := seen.Load(); got != want {
			t.Errorf("request %d was sent %q, want %q", i, got, want)
		}
	}
	refuse.Store(true)
	if err := c.Do(ctx, http.MethodGet, "/api/v1/namespaces", nil, nil, &out); err != nil {
		t.Fatalf("after a refusal: %v", err)
	}
	if got := seen.Load(); got != "Bearer t3-hi" {
		t.Errorf("after a refusal the request was sent %q, want the plugin's third answer", got)
	}
	err = c.Do(ctx, http.MethodGet, "/api/v1/namespaces/default/pods/gone", nil, nil, &out)
	if !IsNotFound(err) || err.Error() != `pods "gone" not found` {
		t.Errorf("a 404: %v (not found: %v)", err, IsNotFound(err))
	}
}

func pemOf(t *testing.T, srv *httptest.Server) []byte {
	t.Helper()
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

// TestPluginCertificateAndImpersonation: a client certificate an exec
// plugin gives is the one the TLS handshake presents (the server asks for
// one), and the kubeconfig's impersonation goes as headers; requests go
// through the cluster's proxy-url.
func TestPluginCertificateAndImpersonation(t *testing.T) {
	certPEM, keyPEM := selfSigned(t, "plugin-user")
	var got atomic.Value
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cn := ""
		if len(r.TLS.PeerCertificates) > 0 {
			cn = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		got.Store(fmt.Sprintf("cn=%s auth=%q user=%s groups=%v", cn, r.Header.Get("Authorization"), r.Header.Get("Impersonate-User"), r.Header.Values("Impersonate-Group")))
		fmt.Fprint(w, `{}`)
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
	srv.StartTLS()
	defer srv.Close()
	var tunnels atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		tunnels.Add(1)
		up, err := net.Dial("tcp", r.Host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		down, rw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			up.Close()
			return
		}
		down.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
		// What the client sent after its CONNECT may be in rw's buffer.
		go func() { io.Copy(up, rw); up.Close() }()
		io.Copy(down, up)
		down.Close()
	}))
	defer proxy.Close()
	dir := t.TempDir()
	cred, _ := json.Marshal(map[string]any{"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
		"status": map[string]string{"clientCertificateData": string(certPEM), "clientKeyData": string(keyPEM)}})
	write(t, dir, "cred.json", string(cred))
	plugin := write(t, dir, "plugin.sh", "#!/bin/sh\ncat "+filepath.Join(dir, "cred.json")+"\n")
	os.Chmod(plugin, 0o755)
	kc := write(t, dir, "config", fmt.Sprintf(`clusters:
- {name: k, cluster: {server: %s, certificate-authority-data: %s, proxy-url: %s}}
users:
- name: u
  user:
    as: someone
    as-groups: [a, b]
    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: %s}
contexts:
- {name: c, context: {cluster: k, user: u}}
current-context: c
`, srv.URL, base64.StdEncoding.EncodeToString(pemOf(t, srv)), proxy.URL, plugin))
	c, err := New(Options{Kubeconfig: kc})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Do(context.Background(), http.MethodGet, "/api", nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if want := `cn=plugin-user auth="" user=someone groups=[a b]`; got.Load() != want {
		t.Errorf("the server saw %v, want %s", got.Load(), want)
	}
	if tunnels.Load() == 0 {
		t.Error("the request did not go through the proxy-url")
	}
}

// selfSigned makes a client certificate and its key, PEM.
func selfSigned(t *testing.T, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}
