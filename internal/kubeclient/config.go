// Package kubeclient speaks to a Kubernetes API server as kubectl does,
// for the little cove asks of one: it reads the kubeconfig (its files,
// contexts and credentials, exec plugins included), makes JSON requests
// and watches, runs commands in a container (exec, WebSocket protocol
// v5) and opens port-forward streams (SPDY over WebSocket).
//
// It is written here rather than taken from client-go: client-go, its API
// types and what they pull in were more than a quarter of cove's static
// binary and of the package initialisers every cove process ran, for a
// few calls on Pods and volume claims. The tests check it against
// client-go's own reading of the same kubeconfigs and against a real API
// server. It needs Kubernetes 1.31 or later (exec v5 and port-forward over
// WebSocket, on by default since then; every supported release has them).
package kubeclient

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v4"
)

// Options choose the kubeconfig, its context and the namespace; the zero
// value is kubectl's choice.
type Options struct {
	Kubeconfig string // "": $KUBECONFIG, or ~/.kube/config
	Context    string // "": the kubeconfig's current context
	Namespace  string // "": the context's namespace, or "default"
}

// kubeconfig is the part of a kubeconfig file cove reads (kubectl's
// clientcmd/api/v1 Config).
type kubeconfig struct {
	CurrentContext string         `yaml:"current-context"`
	Clusters       []namedCluster `yaml:"clusters"`
	Users          []namedUser    `yaml:"users"`
	Contexts       []namedContext `yaml:"contexts"`
}

type namedCluster struct {
	Name    string  `yaml:"name"`
	Cluster cluster `yaml:"cluster"`
}

type cluster struct {
	Server                   string `yaml:"server"`
	TLSServerName            string `yaml:"tls-server-name"`
	InsecureSkipTLSVerify    bool   `yaml:"insecure-skip-tls-verify"`
	CertificateAuthority     string `yaml:"certificate-authority"`
	CertificateAuthorityData string `yaml:"certificate-authority-data"`
	ProxyURL                 string `yaml:"proxy-url"`
}

type namedUser struct {
	Name string `yaml:"name"`
	User user   `yaml:"user"`
}

type user struct {
	ClientCertificate     string              `yaml:"client-certificate"`
	ClientCertificateData string              `yaml:"client-certificate-data"`
	ClientKey             string              `yaml:"client-key"`
	ClientKeyData         string              `yaml:"client-key-data"`
	Token                 string              `yaml:"token"`
	TokenFile             string              `yaml:"tokenFile"`
	Impersonate           string              `yaml:"as"`
	ImpersonateUID        string              `yaml:"as-uid"`
	ImpersonateGroups     []string            `yaml:"as-groups"`
	ImpersonateUserExtra  map[string][]string `yaml:"as-user-extra"`
	Username              string              `yaml:"username"`
	Password              string              `yaml:"password"`
	Exec                  *execConfig         `yaml:"exec"`
	AuthProvider          *struct {
		Name string `yaml:"name"`
	} `yaml:"auth-provider"`
}

// execConfig is a credential plugin (client.authentication.k8s.io).
type execConfig struct {
	Command            string   `yaml:"command"`
	Args               []string `yaml:"args"`
	Env                []envVar `yaml:"env"`
	APIVersion         string   `yaml:"apiVersion"`
	InstallHint        string   `yaml:"installHint"`
	ProvideClusterInfo bool     `yaml:"provideClusterInfo"`
	InteractiveMode    string   `yaml:"interactiveMode"`
}

type envVar struct {
	Name  string `yaml:"name"`
	Value string `yaml:"value"`
}

type namedContext struct {
	Name    string     `yaml:"name"`
	Context contextRef `yaml:"context"`
}

type contextRef struct {
	Cluster   string `yaml:"cluster"`
	User      string `yaml:"user"`
	Namespace string `yaml:"namespace"`
}

// endpoint is a context resolved: where the API server is and how to
// prove who we are, with the files it names read.
type endpoint struct {
	Server    string
	Namespace string
	Cluster   cluster
	User      user
	CAData    []byte // PEM, nil for the system's roots
	CertData  []byte // PEM client certificate and key, if any
	KeyData   []byte
}

// inCluster is where a Pod finds its service account.
const inCluster = "/var/run/secrets/kubernetes.io/serviceaccount"

// load reads the kubeconfig as kubectl does: o.Kubeconfig, else the files
// in $KUBECONFIG (the first to name a cluster, user or context, or to set
// the current context, wins), else ~/.kube/config; with none, the
// service account of the Pod cove runs in, if it does.
func load(o Options) (*endpoint, error) {
	var paths []string
	explicit := o.Kubeconfig != ""
	switch {
	case explicit:
		paths = []string{o.Kubeconfig}
	case os.Getenv("KUBECONFIG") != "":
		seen := map[string]bool{}
		for _, p := range filepath.SplitList(os.Getenv("KUBECONFIG")) {
			if p != "" && !seen[p] {
				seen[p] = true
				paths = append(paths, p)
			}
		}
	default:
		if home, err := os.UserHomeDir(); err == nil {
			paths = []string{filepath.Join(home, ".kube", "config")}
		}
	}
	var merged kubeconfig
	found := false
	clusters, users, contexts := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) && !explicit {
			continue // kubectl passes over a missing file of the list
		}
		if err != nil {
			return nil, err
		}
		found = true
		var kc kubeconfig
		if err := yaml.Unmarshal(b, &kc); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		dir := filepath.Dir(p)
		if merged.CurrentContext == "" {
			merged.CurrentContext = kc.CurrentContext
		}
		for _, c := range kc.Clusters {
			if !clusters[c.Name] {
				clusters[c.Name] = true
				c.Cluster.CertificateAuthority = resolve(dir, c.Cluster.CertificateAuthority)
				merged.Clusters = append(merged.Clusters, c)
			}
		}
		for _, u := range kc.Users {
			if !users[u.Name] {
				users[u.Name] = true
				u.User.ClientCertificate = resolve(dir, u.User.ClientCertificate)
				u.User.ClientKey = resolve(dir, u.User.ClientKey)
				u.User.TokenFile = resolve(dir, u.User.TokenFile)
				if e := u.User.Exec; e != nil && strings.ContainsRune(e.Command, filepath.Separator) {
					e.Command = resolve(dir, e.Command) // a bare name is looked up in PATH
				}
				merged.Users = append(merged.Users, u)
			}
		}
		for _, c := range kc.Contexts {
			if !contexts[c.Name] {
				contexts[c.Name] = true
				merged.Contexts = append(merged.Contexts, c)
			}
		}
	}
	if !found {
		if os.Getenv("KUBERNETES_SERVICE_HOST") != "" && os.Getenv("KUBERNETES_SERVICE_PORT") != "" {
			return serviceAccount(o)
		}
		return nil, errors.New("no configuration: no kubeconfig file found")
	}
	return merged.endpoint(o)
}

// resolve makes a path the kubeconfig at dir names absolute, as kubectl
// does (relative to that file).
func resolve(dir, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

func (kc *kubeconfig) endpoint(o Options) (*endpoint, error) {
	name := o.Context
	if name == "" {
		name = kc.CurrentContext
	}
	if name == "" {
		return nil, errors.New("no context chosen: the kubeconfig has no current-context (kubectl config use-context NAME, or --context)")
	}
	var ctx *contextRef
	for i := range kc.Contexts {
		if kc.Contexts[i].Name == name {
			ctx = &kc.Contexts[i].Context
		}
	}
	if ctx == nil {
		return nil, fmt.Errorf("context %q does not exist", name)
	}
	e := &endpoint{Namespace: ctx.Namespace}
	ok := false
	for _, c := range kc.Clusters {
		if c.Name == ctx.Cluster {
			e.Cluster, ok = c.Cluster, true
		}
	}
	if !ok {
		return nil, fmt.Errorf("context %q: cluster %q does not exist", name, ctx.Cluster)
	}
	ok = ctx.User == ""
	for _, u := range kc.Users {
		if u.Name == ctx.User {
			e.User, ok = u.User, true
		}
	}
	if !ok {
		return nil, fmt.Errorf("context %q: user %q does not exist", name, ctx.User)
	}
	if o.Namespace != "" {
		e.Namespace = o.Namespace
	}
	return e, e.read()
}

// serviceAccount is the endpoint of a Pod's own service account.
func serviceAccount(o Options) (*endpoint, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	e := &endpoint{
		Namespace: o.Namespace,
		Cluster:   cluster{Server: "https://" + host + ":" + port, CertificateAuthority: inCluster + "/ca.crt"},
		User:      user{TokenFile: inCluster + "/token"},
	}
	if e.Namespace == "" {
		b, _ := os.ReadFile(inCluster + "/namespace")
		e.Namespace = strings.TrimSpace(string(b))
	}
	return e, e.read()
}

// read checks the endpoint and reads the files and data it names.
func (e *endpoint) read() error {
	if e.Namespace == "" {
		e.Namespace = "default"
	}
	e.Server = strings.TrimRight(e.Cluster.Server, "/")
	if e.Server == "" {
		return errors.New("the cluster has no server")
	}
	if !strings.HasPrefix(e.Server, "https://") && !strings.HasPrefix(e.Server, "http://") {
		e.Server = "https://" + e.Server // as kubectl: a bare host:port is https
	}
	if p := e.User.AuthProvider; p != nil {
		return fmt.Errorf("user: auth-provider %q is not supported (kubectl dropped its own; use the provider's exec credential plugin)", p.Name)
	}
	var err error
	if e.CAData, err = fileOrData("certificate-authority", e.Cluster.CertificateAuthority, e.Cluster.CertificateAuthorityData); err != nil {
		return err
	}
	if e.Cluster.InsecureSkipTLSVerify && e.CAData != nil {
		return errors.New("the cluster has both a certificate authority and insecure-skip-tls-verify: choose one")
	}
	if e.CertData, err = fileOrData("client-certificate", e.User.ClientCertificate, e.User.ClientCertificateData); err != nil {
		return err
	}
	if e.KeyData, err = fileOrData("client-key", e.User.ClientKey, e.User.ClientKeyData); err != nil {
		return err
	}
	if (e.CertData == nil) != (e.KeyData == nil) {
		return errors.New("user: a client certificate needs its key, and a key its certificate")
	}
	if e.User.Token != "" && e.User.Username != "" {
		return errors.New("user: a token and a username and password: choose one")
	}
	return nil
}

// fileOrData is the PEM a kubeconfig gives by file name or inline
// (base64), nil for neither.
func fileOrData(what, file, data string) ([]byte, error) {
	if data != "" {
		b, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			return nil, fmt.Errorf("%s-data: %w", what, err)
		}
		return b, nil
	}
	if file == "" {
		return nil, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return b, nil
}
