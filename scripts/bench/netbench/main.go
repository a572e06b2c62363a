// Command netbench is the network benchmark's client and servers (see
// scripts/bench/net.sh): one static binary that runs on the host and,
// bound in, inside the containers (busybox's wget crashes without a libc).
//
//	netbench bulk ADDR BYTES   serve BYTES zeros to every connection
//	netbench get ADDR          read a connection to its end; print "BYTES SECONDS"
//	netbench echo ADDR         answer every connection with one line
//	netbench ping ADDR N       N requests, each on a new connection; print
//	                           the median and 99th percentile in µs
package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"time"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: netbench bulk|get|echo|ping ADDR [N]")
		os.Exit(2)
	}
	addr := os.Args[2]
	var err error
	switch os.Args[1] {
	case "bulk":
		n, _ := strconv.ParseInt(os.Args[3], 10, 64)
		err = serve(addr, func(c net.Conn) { io.Copy(c, io.LimitReader(zeros{}, n)) })
	case "echo":
		err = serve(addr, func(c net.Conn) {
			if _, err := bufio.NewReader(c).ReadString('\n'); err == nil {
				c.Write([]byte("pong\n"))
			}
		})
	case "get":
		err = get(addr)
	case "ping":
		n, _ := strconv.Atoi(os.Args[3])
		err = ping(addr, n)
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "netbench:", err)
		os.Exit(1)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func serve(addr string, handle func(net.Conn)) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		go func() { handle(c); c.Close() }()
	}
}

func get(addr string) error {
	start := time.Now()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	n, err := io.CopyBuffer(io.Discard, c, make([]byte, 1<<20))
	if err != nil {
		return err
	}
	fmt.Printf("%d %.6f\n", n, time.Since(start).Seconds())
	return nil
}

func ping(addr string, n int) error {
	var took []time.Duration
	for i := 0; i < n; i++ {
		start := time.Now()
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return err
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("ping\n")); err != nil {
			return err
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if err != nil || line != "pong\n" {
			return fmt.Errorf("request %d: %q %v", i, line, err)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	fmt.Printf("%d %d\n", took[len(took)/2].Microseconds(), took[len(took)*99/100].Microseconds())
	return nil
}
