package mcpclient

import (
	"context"
	"encoding/json"
	"testing"
)

// BenchmarkCallRoundTrip: one call to server-everything's echo, over
// stdio, from Plan to the rendered answer (go test -bench CallRoundTrip
// ./agent/mcpclient).
func BenchmarkCallRoundTrip(b *testing.B) {
	node, everything, _ := referenceServers(b)
	c := ServerConfig{Command: node, Args: []string{everything, "stdio"}}
	m := Start(context.Background(), []Spec{hostSpec("everything", c)}, nil)
	defer m.Close()
	m.Ready(context.Background())
	var echo *tool
	for _, tl := range m.Tools() {
		if tl.Spec().Name == "mcp__everything__echo" {
			echo = tl.(*tool)
		}
	}
	if echo == nil {
		b.Fatalf("no echo: %+v", m.Status())
	}
	args, _ := json.Marshal(map[string]string{"message": "x"})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		act, err := echo.Plan(context.Background(), args)
		if err != nil {
			b.Fatal(err)
		}
		if out, err := act.Do(context.Background()); err != nil || out != "Echo: x" {
			b.Fatalf("%q %v", out, err)
		}
	}
}
