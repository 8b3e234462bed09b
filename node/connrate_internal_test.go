package node

import (
	"net/netip"
	"testing"
)

// TestConnRateLimiterLetsAClientPoll: one address may open a burst of
// connRateBurst connections (libp2p's default refused the 17th: a client
// polling `bedwe result` was locked out), a flood from it is still bounded,
// and loopback is not limited.
func TestConnRateLimiterLetsAClientPoll(t *testing.T) {
	l := connRateLimiter()
	client := netip.MustParseAddr("10.77.1.254")
	for i := range connRateBurst {
		if !l.Allow(client) {
			t.Fatalf("connection %d from one address refused; want a burst of %d", i+1, connRateBurst)
		}
	}
	allowed := 0
	for range 10 * connRateBurst {
		if l.Allow(client) {
			allowed++
		}
	}
	if allowed > connRateBurst/2 {
		t.Fatalf("a flood after the burst got %d of %d connections through; want it bounded by %d a second", allowed, 10*connRateBurst, connRatePerSecond)
	}
	if !l.Allow(netip.MustParseAddr("10.77.1.9")) {
		t.Fatal("another address was refused by the first one's flood")
	}
	for range 10 * connRateBurst {
		if !l.Allow(netip.MustParseAddr("127.0.0.1")) {
			t.Fatal("loopback refused")
		}
	}
}
