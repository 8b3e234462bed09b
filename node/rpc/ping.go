package rpc

import (
	"context"
	"fmt"

	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
)

// Ping measures one libp2p ping round trip to id within ctx. Unlike
// reading ping.Ping's channel directly, it reports a ping that ctx ended
// before the answer came as an error: ping.Ping then closes its channel
// without a result, and the zero Result read from it has no error — a
// peer behind a cut, on a connection that still looks open, would read
// as answering.
func Ping(ctx context.Context, h host.Host, id peer.ID) (time.Duration, error) {
	res, ok := <-ping.Ping(ctx, h, id)
	switch {
	case !ok:
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("ping %s: no answer: %w", ShortID(id), err)
		}
		return 0, fmt.Errorf("ping %s: no answer", ShortID(id))
	case res.Error != nil:
		return 0, res.Error
	}
	return res.RTT, nil
}
