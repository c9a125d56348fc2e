//go:build integration || record

package discard

import "github.com/pvediskcheck/pvediskcheck/internal/fakenode"

// agentArgs are the guest agent channel as qemu-server adds it for agent: 1.
func agentArgs(n *fakenode.Node, vmid int) []string {
	return []string{"-chardev", "socket,path=" + n.Paths.QGASocket(vmid) + ",server=on,wait=off,id=qga0",
		"-device", "virtio-serial,id=qga0-bus", "-device", "virtserialport,chardev=qga0,name=org.qemu.guest_agent.0"}
}
