// Package client talks to a running bedwe peer from outside: it starts a
// short-lived libp2p host, dials the peer, and sends client requests
// (submit, status, result, cancel, peers, list).
//
// It finds the peer from a multiaddr, from a node's data directory
// (DATA/node.json), or from a testnet directory (DIR/manifest.json). On a
// private mesh the host needs the mesh's swarm key, and on a mesh with
// membership its identity must be a client key the node authorizes
// (Options): the node's own DATA/client.key, or a key listed in the node's
// --clients. Without a key the client uses a throw-away identity.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/rpc"
)

// Client is a connection to one bedwe peer.
type Client struct {
	host    host.Host
	target  peer.AddrInfo
	timeout time.Duration
	opts    Options
}

// Dial connects to the peer at a full multiaddr (with /p2p/ID) with a
// throw-away identity on a public network.
func Dial(ctx context.Context, addrs ...string) (*Client, error) {
	return DialWith(ctx, Options{}, addrs...)
}

// DialWith connects to the peer at a full multiaddr (with /p2p/ID) with the
// swarm key and client key of opts.
func DialWith(ctx context.Context, opts Options, addrs ...string) (*Client, error) {
	if len(addrs) == 0 {
		return nil, errors.New("no peer address to dial")
	}
	var info *peer.AddrInfo
	for _, a := range addrs {
		ai, err := peer.AddrInfoFromString(a)
		if err != nil {
			return nil, fmt.Errorf("peer address %q: %w (expected e.g. /ip4/127.0.0.1/tcp/4001/p2p/12D3Koo...)", a, err)
		}
		if info == nil {
			info = ai
		} else if ai.ID == info.ID {
			info.Addrs = append(info.Addrs, ai.Addrs...)
		}
	}
	h, err := opts.newHost()
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := h.Connect(cctx, *info); err != nil {
		h.Close()
		return nil, connectError(info.ID, h.ID(), opts, false, err)
	}
	// A node with membership closes an unlisted client's connection just
	// after the dialer's side of the handshake ended: one round trip tells.
	if _, err := rpc.Ping(cctx, h, info.ID); err != nil {
		h.Close()
		return nil, connectError(info.ID, h.ID(), opts, true, err)
	}
	return &Client{host: h, target: *info, timeout: 30 * time.Second, opts: opts}, nil
}

// DialDataDir connects to the node whose data directory is dir, with the
// swarm key and client key that node names in its node.json.
func DialDataDir(ctx context.Context, dir string) (*Client, error) {
	return DialDataDirWith(ctx, dir, Options{})
}

// DialDataDirWith is DialDataDir with keys of opts taking precedence over
// the node's.
func DialDataDirWith(ctx context.Context, dir string, opts Options) (*Client, error) {
	nf, err := ReadNodeFile(dir)
	if err != nil {
		return nil, err
	}
	local, err := NodeOptions(nf)
	if err != nil {
		return nil, err
	}
	c, err := DialWith(ctx, opts.Or(local), nf.Addrs...)
	if err != nil {
		return nil, fmt.Errorf("node in %s (pid %d) does not answer — is `bedwe node --data %s` running? %w", dir, nf.PID, dir, err)
	}
	return c, nil
}

// ReadNodeFile reads DATA/node.json.
func ReadNodeFile(dir string) (api.NodeFile, error) {
	var nf api.NodeFile
	path := filepath.Join(dir, "node.json")
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nf, fmt.Errorf("no node has run with data directory %s (missing %s); start one with `bedwe node --data %s` or pass --peer", dir, path, dir)
		}
		return nf, fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(data, &nf); err != nil {
		return nf, fmt.Errorf("read %s: %w", path, err)
	}
	return nf, nil
}

// Close shuts the client host down.
func (c *Client) Close() error { return c.host.Close() }

// Peer is the ID of the peer this client talks to.
func (c *Client) Peer() peer.ID { return c.target.ID }

func (c *Client) do(ctx context.Context, req api.ClientRequest) (api.ClientResponse, error) {
	var resp api.ClientResponse
	if err := rpc.CallCBOR(ctx, c.host, c.target.ID, api.ProtoClient, req, &resp, c.timeout); err != nil {
		return resp, err
	}
	if resp.Error != "" {
		return resp, &RemoteError{Msg: resp.Error, Code: resp.Code}
	}
	return resp, nil
}

// RemoteError is an error reported by the peer (a bad workflow, an unknown
// ID), as opposed to a failure to reach it.
type RemoteError struct {
	Msg string
	// Code classifies the refusal when the peer gave one (api.CodeBusy).
	Code string
}

func (e *RemoteError) Error() string { return e.Msg }

// IsBusy reports whether err is a peer's refusal because it is at its
// limits (api.CodeBusy): nothing was recorded, and the same request may
// succeed later or on another peer.
func IsBusy(err error) bool {
	var re *RemoteError
	return errors.As(err, &re) && re.Code == api.CodeBusy
}

// Submit sends a workflow (its text and a file name for error messages)
// with its input JSON; the peer becomes the workflow's origin.
func (c *Client) Submit(ctx context.Context, fileName, source string, input json.RawMessage) (api.Status, error) {
	resp, err := c.do(ctx, api.ClientRequest{Op: api.OpSubmit, FileName: fileName, Source: source, Input: input})
	if err != nil {
		return api.Status{}, err
	}
	return *resp.Status, nil
}

// Status returns the workflow's progress as its origin knows it.
func (c *Client) Status(ctx context.Context, id string) (api.Status, error) {
	resp, err := c.do(ctx, api.ClientRequest{Op: api.OpStatus, ID: id})
	if err != nil {
		return api.Status{}, err
	}
	return *resp.Status, nil
}

// Result returns the status with the result and the full trace.
func (c *Client) Result(ctx context.Context, id string) (api.Status, error) {
	resp, err := c.do(ctx, api.ClientRequest{Op: api.OpResult, ID: id})
	if err != nil {
		return api.Status{}, err
	}
	return *resp.Status, nil
}

// Cancel stops the workflow everywhere.
func (c *Client) Cancel(ctx context.Context, id string) (api.Status, error) {
	resp, err := c.do(ctx, api.ClientRequest{Op: api.OpCancel, ID: id})
	if err != nil {
		return api.Status{}, err
	}
	return *resp.Status, nil
}

// Peers returns the peer's view of the mesh, itself first.
func (c *Client) Peers(ctx context.Context) ([]api.PeerInfo, error) {
	resp, err := c.do(ctx, api.ClientRequest{Op: api.OpPeers})
	if err != nil {
		return nil, err
	}
	return resp.Peers, nil
}

// Refused returns the peers this peer refused recently (not members,
// unauthorized clients), newest first.
func (c *Client) Refused(ctx context.Context) ([]api.RefusedPeer, error) {
	resp, err := c.do(ctx, api.ClientRequest{Op: api.OpPeers})
	if err != nil {
		return nil, err
	}
	return resp.Refused, nil
}

// List returns the workflows this peer is origin of.
func (c *Client) List(ctx context.Context) ([]api.Status, error) {
	resp, err := c.do(ctx, api.ClientRequest{Op: api.OpList})
	if err != nil {
		return nil, err
	}
	return resp.Statuses, nil
}

// Wait polls the workflow until it ends, calling progress (if non-nil) on
// every change, and returns the final status with result and trace.
func (c *Client) Wait(ctx context.Context, id string, every time.Duration, progress func(api.Status)) (api.Status, error) {
	var last string
	var origins []string
	failures := 0
	for {
		st, err := c.Status(ctx, id)
		if err != nil {
			// The origin may be down (its replicas know the workflow too)
			// or only slow: give it a few tries before giving up.
			if alt, ok := statusFromAny(ctx, c.opts, origins, id); ok {
				st, err = alt, nil
				if st.State != api.StateRunning {
					return st, nil
				}
			} else {
				var remote *RemoteError
				if failures++; failures > 5 || errors.As(err, &remote) {
					return st, err
				}
				select {
				case <-ctx.Done():
					return st, ctx.Err()
				case <-time.After(time.Duration(failures) * time.Second):
				}
				continue
			}
		}
		failures = 0
		if len(st.Origins) > 0 {
			origins = st.Origins
		}
		key := fmt.Sprintf("%s/%d/%d", st.State, st.StepsDone, len(st.Recent))
		if progress != nil && key != last {
			progress(st)
			last = key
		}
		if st.State != api.StateRunning {
			return c.Result(ctx, id)
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(every):
		}
	}
}

// statusFromAny asks each address in turn for the workflow's result.
func statusFromAny(ctx context.Context, opts Options, addrs []string, id string) (api.Status, bool) {
	for _, a := range addrs {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := DialWith(cctx, opts, a)
		if err != nil {
			cancel()
			continue
		}
		st, err := c.Result(cctx, id)
		c.Close()
		cancel()
		if err == nil {
			return st, true
		}
	}
	return api.Status{}, false
}

// Ping measures one libp2p ping round trip to the peer on the open
// connection: a stream round trip with no bedwe work behind it (the
// bench's floor for a hand-off).
func (c *Client) Ping(ctx context.Context) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	rtt, err := rpc.Ping(ctx, c.host, c.target.ID)
	if err != nil {
		return 0, fmt.Errorf("ping %s: %w", c.target.ID, err)
	}
	return rtt, nil
}
