package qmp

// Backing walks a format node's backing chain in the live graph: each
// "backing" child is the next layer down (a format node over its own
// protocol node), newest first. Empty for an image without a backing file.
// At most 64 layers are followed (a cycle cannot loop).
func (g *Graph) Backing(format string) []DriveChain {
	var out []DriveChain
	cur := format
	for i := 0; i < 64; i++ {
		child, ok := g.Children[cur]["backing"]
		if !ok {
			break
		}
		c, ok := g.Chain(child)
		if !ok {
			break
		}
		out = append(out, c)
		cur = c.Format.Name
	}
	return out
}
