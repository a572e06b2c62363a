package kubeclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client is a connection to one namespace of a cluster, as the
// kubeconfig says. It does not talk to the cluster until asked.
type Client struct {
	// Server is the API server's URL; Namespace the one chosen.
	Server, Namespace string

	creds *credentials
	http  *http.Client // requests (HTTP/2 where the server speaks it)
	http1 *http.Client // upgrades to WebSocket: HTTP/1.1 only
}

// New reads the kubeconfig o chooses and returns a client for it.
func New(o Options) (*Client, error) {
	e, err := load(o)
	if err != nil {
		return nil, err
	}
	return newClient(e)
}

func newClient(e *endpoint) (*Client, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: e.Cluster.TLSServerName, InsecureSkipVerify: e.Cluster.InsecureSkipTLSVerify}
	if e.CAData != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(e.CAData) {
			return nil, errors.New("certificate-authority: no PEM certificate in it")
		}
		tc.RootCAs = pool
	}
	creds := &credentials{e: e}
	if e.CertData != nil {
		cert, err := tls.X509KeyPair(e.CertData, e.KeyData)
		if err != nil {
			return nil, fmt.Errorf("user: client certificate: %w", err)
		}
		creds.cert = &cert
	}
	// Asked at each handshake: an exec plugin's certificate is renewed.
	tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return creds.certificate() }
	proxy := http.ProxyFromEnvironment
	if e.Cluster.ProxyURL != "" {
		u, err := url.Parse(e.Cluster.ProxyURL)
		if err != nil {
			return nil, fmt.Errorf("proxy-url: %w", err)
		}
		proxy = http.ProxyURL(u)
	}
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	transport := func(h2 bool) *http.Transport {
		t := &http.Transport{
			Proxy:               proxy,
			DialContext:         dialer.DialContext,
			TLSClientConfig:     tc.Clone(),
			TLSHandshakeTimeout: 10 * time.Second,
			MaxIdleConnsPerHost: 25,
			IdleConnTimeout:     90 * time.Second,
			ForceAttemptHTTP2:   h2,
		}
		if h2 {
			// As client-go: a connection that went silent (a dropped
			// network) is found by its pings, not by the next request
			// hanging on it.
			t.HTTP2 = &http.HTTP2Config{SendPingTimeout: 30 * time.Second, PingTimeout: 15 * time.Second}
		} else {
			t.TLSClientConfig.NextProtos = []string{"http/1.1"}
		}
		return t
	}
	return &Client{
		Server:    e.Server,
		Namespace: e.Namespace,
		creds:     creds,
		http:      &http.Client{Transport: transport(true)},
		http1:     &http.Client{Transport: transport(false)},
	}, nil
}

// StatusError is the API server's refusal: its HTTP code and the reason
// and message of its Status.
type StatusError struct {
	Code    int
	Reason  string // NotFound, AlreadyExists, Forbidden, …
	Message string
}

func (e *StatusError) Error() string {
	if e.Message != "" {
		return e.Message
	}
	return fmt.Sprintf("the API server answered %d %s", e.Code, http.StatusText(e.Code))
}

// IsNotFound says whether err is the API server's "not found".
func IsNotFound(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && (se.Reason == "NotFound" || se.Reason == "" && se.Code == http.StatusNotFound)
}

// IsAlreadyExists says whether err is the API server's refusal to create
// what exists.
func IsAlreadyExists(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Reason == "AlreadyExists"
}

// IsGone says whether err is a watch's "too old a resourceVersion" (410
// Gone): list or get again, then watch from there.
func IsGone(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && (se.Code == http.StatusGone || se.Reason == "Expired" || se.Reason == "Gone")
}

// status is the API's Status object, the part cove reads.
type status struct {
	Kind    string `json:"kind"`
	Status  string `json:"status"`
	Message string `json:"message"`
	Reason  string `json:"reason"`
	Code    int    `json:"code"`
	Details struct {
		Causes []struct {
			Reason  string `json:"reason"`
			Message string `json:"message"`
		} `json:"causes"`
	} `json:"details"`
}

func (s *status) err(code int) error {
	if s.Code != 0 {
		code = s.Code
	}
	return &StatusError{Code: code, Reason: s.Reason, Message: s.Message}
}

// URL is the API server's URL for path (from /api or /apis) and query.
func (c *Client) URL(path string, query url.Values) string {
	u := c.Server + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	return u
}

// Do makes a request: in, if not nil, is sent as JSON (as a merge patch
// for PATCH; []byte as it is), and the answer is decoded into out, if not
// nil. An answer other than 2xx is a *StatusError.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	var body []byte
	if in != nil {
		if b, ok := in.([]byte); ok {
			body = b
		} else {
			var err error
			if body, err = json.Marshal(in); err != nil {
				return err
			}
		}
	}
	resp, err := c.send(ctx, method, path, query, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return answerError(resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: the answer: %w", method, path, err)
		}
	}
	return nil
}

// answerError is the error an answer of code with body says.
func answerError(code int, body []byte) error {
	var s status
	if json.Unmarshal(body, &s) == nil && s.Kind == "Status" {
		return s.err(code)
	}
	msg := strings.TrimSpace(string(body))
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	se := &StatusError{Code: code, Message: fmt.Sprintf("the API server answered %d %s", code, http.StatusText(code))}
	if msg != "" {
		se.Message += ": " + msg
	}
	return se
}

// send makes the request, once more with fresh credentials if the
// server did not take them (an exec plugin's token that expired early).
func (c *Client) send(ctx context.Context, method, path string, query url.Values, body []byte) (*http.Response, error) {
	for try := 0; ; try++ {
		req, err := http.NewRequestWithContext(ctx, method, c.URL(path, query), bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "application/json")
		if body != nil {
			ct := "application/json"
			if method == http.MethodPatch {
				ct = "application/merge-patch+json"
			}
			req.Header.Set("Content-Type", ct)
		}
		h, err := c.creds.headers(ctx)
		if err != nil {
			return nil, err
		}
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := c.http.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode == http.StatusUnauthorized && try == 0 && c.creds.expire() {
			resp.Body.Close()
			continue
		}
		return resp, nil
	}
}

// Event is one change a watch reports.
type Event struct {
	Type   string // ADDED, MODIFIED, DELETED, BOOKMARK
	Object json.RawMessage
}

// Watch watches path (a collection) from query's resourceVersion; each
// event is sent on the channel, which closes when the server ends the
// watch, ctx ends, or an error comes (sent on errs first). An ERROR event
// is a *StatusError on errs.
func (c *Client) Watch(ctx context.Context, path string, query url.Values) (<-chan Event, <-chan error, error) {
	q := url.Values{}
	for k, v := range query {
		q[k] = v
	}
	q.Set("watch", "true")
	resp, err := c.send(ctx, http.MethodGet, path, q, nil)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		return nil, nil, answerError(resp.StatusCode, b)
	}
	events, errs := make(chan Event), make(chan error, 1)
	go func() {
		defer close(events)
		defer resp.Body.Close()
		d := json.NewDecoder(resp.Body)
		for {
			var ev struct {
				Type   string          `json:"type"`
				Object json.RawMessage `json:"object"`
			}
			if err := d.Decode(&ev); err != nil {
				if !errors.Is(err, io.EOF) && ctx.Err() == nil {
					errs <- fmt.Errorf("watch %s: %w", path, err)
				}
				return
			}
			if ev.Type == "ERROR" {
				var s status
				json.Unmarshal(ev.Object, &s)
				errs <- s.err(http.StatusInternalServerError)
				return
			}
			select {
			case events <- Event{Type: ev.Type, Object: ev.Object}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return events, errs, nil
}
