package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"time"
)

// rawQMP is the floor the benchmarks compare against: a client that only
// connects, reads the greeting, sends qmp_capabilities and then each command,
// and reads every reply as a line (events skipped by their first bytes),
// without parsing or checking anything. No client can do the same exchange
// for less; what the tool spends above it is its own.
func rawQMP(sock string, cmds ...string) error {
	c, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	rd := bufio.NewReaderSize(c, 64<<10)
	line := func() ([]byte, error) {
		var first []byte
		for {
			frag, err := rd.ReadSlice('\n')
			if first == nil && len(frag) > 0 {
				first = append(first, frag[:min(len(frag), 16)]...)
			}
			if err != bufio.ErrBufferFull {
				return first, err
			}
		}
	}
	if _, err := line(); err != nil {
		return fmt.Errorf("greeting: %w", err)
	}
	for _, cmd := range append([]string{`{"execute":"qmp_capabilities"}`}, cmds...) {
		if _, err := c.Write([]byte(cmd + "\n")); err != nil {
			return err
		}
		for {
			head, err := line()
			if err != nil {
				return fmt.Errorf("%s: %w", cmd, err)
			}
			if bytes.HasPrefix(head, []byte(`{"return"`)) {
				break
			}
			if bytes.HasPrefix(head, []byte(`{"error"`)) {
				return fmt.Errorf("%s: %s", cmd, head)
			}
		}
	}
	return nil
}

// qomGet is a qom-get command line.
func qomGet(path, property string) string {
	return sf(`{"execute":"qom-get","arguments":{"path":%q,"property":%q}}`, path, property)
}
