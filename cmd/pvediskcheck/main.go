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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args, os.Stdout, os.Stderr))
}
