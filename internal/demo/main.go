// Command demo starts a scratch Proxmox VE node with Lab 37's VM 370 (real
// QEMU, disks on loop devices laid out like local-lvm, see internal/fakenode)
// and either runs pvediskcheck's commands against it with one line of
// explanation each (make demo), or only keeps it running for another program
// (make deb-test). Everything it starts is stopped and released when it ends,
// also on Ctrl-C or SIGTERM.
//
//	demo run -bin bin/pvediskcheck [-dir DIR]
//	demo serve [-dir DIR]       prints the node root, runs until stdin closes or a signal
//	demo check-cache <FILE      checks `pvediskcheck cache 370 --json` for that VM
//	demo overhead -bin bin/pvediskcheck [-rounds N] DISK BENCH-FLAGS...
//	                            boots the test guest and times bench against the same fio runs by hand
//
// It needs root (loop devices) and QEMU, as the tests do.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

const usage = `usage: demo run -bin PATH [-dir DIR]   start VM 370 and run pvediskcheck's commands against it
       demo serve [-dir DIR]           start VM 370, print the node root, run until stdin closes
       demo check-cache <FILE          check 'pvediskcheck cache 370 --json' output
       demo overhead -bin PATH [-dir DIR] [-rounds N] [-v] DISK... BENCH-FLAGS...
                                       boot VM 370 with the test guest, time 'bench 370 DISK... BENCH-FLAGS'
                                       against its --dry-run's fio command lines run by hand through the agent`

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, usage)
		return 2
	}
	fs := flag.NewFlagSet("demo "+args[0], flag.ContinueOnError)
	bin := fs.String("bin", "bin/pvediskcheck", "the pvediskcheck binary to demonstrate")
	dir := fs.String("dir", "", "where to lay out the node (default: a new temporary directory, removed at the end)")
	rounds := fs.Int("rounds", 3, "overhead: timed rounds (the tool, then by hand twice)")
	verbose := fs.Bool("v", false, "overhead: print each round's tool output, stamped, and each fio run's time by hand")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	// Signals cancel ctx; they stay caught until the end, so a second
	// Ctrl-C cannot cut the clean-up short.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()

	switch args[0] {
	case "run":
		return withNode(ctx, *dir, false, func(l *lab) error { return demo(ctx, l, *bin, os.Stdout, os.Stderr) })
	case "serve":
		return withNode(ctx, *dir, false, func(l *lab) error { return serve(ctx, l) })
	case "overhead":
		return withNode(ctx, *dir, true, func(l *lab) error { return overhead(ctx, l, *bin, *rounds, *verbose, fs.Args(), os.Stdout) })
	case "check-cache":
		if err := checkCacheJSON(os.Stdin); err != nil {
			fmt.Fprintln(os.Stderr, "demo: cache --json:", err)
			return 1
		}
		fmt.Println("demo: cache --json shows VM 370 running with its four disks, controllers, volumes and cache=none as expected")
		return 0
	}
	fmt.Fprintln(os.Stderr, usage)
	return 2
}

// withNode starts the lab, runs fn, and always cleans up: QEMU stopped, loop
// devices detached, /dev/<vg> removed, and the directory when it made it.
func withNode(ctx context.Context, dir string, guest bool, fn func(*lab) error) (code int) {
	made := false
	if dir == "" {
		d, err := os.MkdirTemp("", "pvediskcheck-demo-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "demo:", err)
			return 1
		}
		dir, made = d, true
	}
	l := &lab{guest: guest}
	defer func() {
		l.close()
		if made {
			_ = os.RemoveAll(dir)
		}
		if ctx.Err() != nil {
			fmt.Fprintln(os.Stderr, "demo: interrupted; VM stopped, loop devices released")
			code = 130
		}
	}()
	if err := l.start(dir); err != nil {
		fmt.Fprintln(os.Stderr, "demo: starting VM 370:", err)
		return 1
	}
	if ctx.Err() != nil {
		return 130
	}
	if err := fn(l); err != nil {
		if !errors.Is(err, context.Canceled) {
			fmt.Fprintln(os.Stderr, "demo:", err)
		}
		return 1
	}
	return 0
}

// serve prints the node root and waits until stdin reaches EOF (the parent
// closed its end or exited) or a signal arrives.
func serve(ctx context.Context, l *lab) error {
	fmt.Println(l.node.Root)
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	select {
	case <-ctx.Done():
	case <-eof:
	}
	return nil
}
