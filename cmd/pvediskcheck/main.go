// Command pvediskcheck tells a Proxmox VE admin what a VM's disks really run
// with, and proves it by measurement, from the node, with no API token.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// version is stamped at build time: -ldflags "-X main.version=..."
var version = "dev"

func main() {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		// A lost terminal ends a run as Ctrl-C does, so what it changed
		// (top --histogram's latency histograms) is undone; under nohup
		// it stays ignored.
		sigs = append(sigs, syscall.SIGHUP)
	}
	ctx, stop := signal.NotifyContext(context.Background(), sigs...)
	defer stop()
	os.Exit(run(ctx, os.Args, os.Stdout, os.Stderr))
}
