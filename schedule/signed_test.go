package schedule

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// testKey derives a deterministic Ed25519 key from one byte.
func testKey(b byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, ed25519.SeedSize))
}

func pubOf(k ed25519.PrivateKey) []byte { return k.Public().(ed25519.PublicKey) }

func signedFixture(t *testing.T) (*Schedule, *Signed, ed25519.PrivateKey) {
	t.Helper()
	s := mustParse(t, daily("Africa/Johannesburg", `{start: "18:00", end: "20:30"}`))
	k := testKey(1)
	sg, err := Sign(s, k)
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	return s, sg, k
}

func TestSignedRoundTrip(t *testing.T) {
	s, sg, k := signedFixture(t)
	wire, err := sg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := UnmarshalSigned(wire)
	if err != nil {
		t.Fatalf("UnmarshalSigned: %v", err)
	}
	got, err := back.Verify([][]byte{pubOf(testKey(9)), pubOf(k)})
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	want, _ := s.Marshal()
	have, _ := got.Marshal()
	if !bytes.Equal(want, have) {
		t.Errorf("verified schedule differs:\n%s\nwant\n%s", have, want)
	}
	if st := stateAt(t, got, "z", "2024-05-01T19:00"); st != Dark {
		t.Errorf("verified schedule: state at 19:00 = %v, want dark", st)
	}
	if !bytes.Equal(back.Signer, pubOf(k)) {
		t.Errorf("signer = %x, want %x", back.Signer, pubOf(k))
	}
}

func TestSignedVerifyRejects(t *testing.T) {
	_, good, k := signedFixture(t)
	other := testKey(2)
	trusted := [][]byte{pubOf(k), pubOf(other)}

	clone := func() *Signed {
		return &Signed{Schedule: bytes.Clone(good.Schedule), Signer: bytes.Clone(good.Signer), Signature: bytes.Clone(good.Signature)}
	}
	// A valid signature over bytes that are not a schedule.
	garbage := []byte("format: bedwe-schedule/1\nzones: [")
	signedGarbage := &Signed{Schedule: garbage, Signer: pubOf(k), Signature: ed25519.Sign(k, signedMessage(garbage))}

	tests := []struct {
		name    string
		sg      *Signed
		trusted [][]byte
		want    error
	}{
		{"edited window", func() *Signed {
			c := clone()
			c.Schedule = bytes.Replace(c.Schedule, []byte("18:00"), []byte("19:00"), 1)
			return c
		}(), trusted, ErrBadSignature},
		{"appended comment", func() *Signed {
			c := clone()
			c.Schedule = append(c.Schedule, "# hi\n"...)
			return c
		}(), trusted, ErrBadSignature},
		{"flipped signature bit", func() *Signed {
			c := clone()
			c.Signature[10] ^= 1
			return c
		}(), trusted, ErrBadSignature},
		{"signer swapped for another trusted key", func() *Signed {
			c := clone()
			c.Signer = pubOf(other)
			return c
		}(), trusted, ErrBadSignature},
		{"re-signed by an untrusted key", func() *Signed {
			c := clone()
			mallory := testKey(3)
			c.Signer, c.Signature = pubOf(mallory), ed25519.Sign(mallory, signedMessage(c.Schedule))
			return c
		}(), trusted, ErrUntrustedSigner},
		{"no trusted keys", clone(), nil, ErrUntrustedSigner},
		{"signature without the context prefix", func() *Signed {
			c := clone()
			c.Signature = ed25519.Sign(k, c.Schedule)
			return c
		}(), trusted, ErrBadSignature},
		{"short signer", func() *Signed {
			c := clone()
			c.Signer = c.Signer[:31]
			return c
		}(), trusted, ErrMalformedSigned},
		{"short signature", func() *Signed {
			c := clone()
			c.Signature = c.Signature[:63]
			return c
		}(), trusted, ErrMalformedSigned},
		{"signed garbage", signedGarbage, trusted, ErrMalformedSigned},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := tc.sg.Verify(tc.trusted)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify error = %v, want %v", err, tc.want)
			}
			if s != nil {
				t.Errorf("Verify returned a schedule with an error")
			}
		})
	}
	if _, err := good.Verify(trusted); err != nil {
		t.Fatalf("the untouched envelope no longer verifies (cases shared memory?): %v", err)
	}
}

func TestSignedErrorNamesSigner(t *testing.T) {
	_, sg, k := signedFixture(t)
	_, err := sg.Verify([][]byte{pubOf(testKey(7))})
	if err == nil || !strings.Contains(err.Error(), Fingerprint(pubOf(k))) {
		t.Errorf("error %v does not name the signer %s", err, Fingerprint(pubOf(k)))
	}
}

func TestSignRejects(t *testing.T) {
	s := mustParse(t, daily("Africa/Johannesburg", `{start: "18:00", end: "20:30"}`))
	if _, err := Sign(s, ed25519.PrivateKey(make([]byte, 32))); err == nil {
		t.Error("Sign accepted a 32-byte (seed-sized) private key")
	}
	bad := &Schedule{Format: FormatV1, TimeZone: "Africa/Johannesburg"} // no issued_at, known_until, zones
	if _, err := Sign(bad, testKey(1)); err == nil {
		t.Error("Sign accepted a schedule that does not parse back")
	}
	noZone := &Schedule{Format: FormatV1, TimeZone: "Nowhere/Atlantis"}
	if _, err := Sign(noZone, testKey(1)); err == nil {
		t.Error("Sign accepted an unknown time zone")
	}
}

func TestUnmarshalSignedRejects(t *testing.T) {
	_, sg, _ := signedFixture(t)
	wire, _ := sg.Marshal()
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"not json", []byte("format: bedwe-signed-schedule/1")},
		{"wrong format", bytes.Replace(wire, []byte(SignedFormat), []byte("bedwe-signed-schedule/9"), 1)},
		{"missing format", []byte(`{"signer":"","signature":"","schedule":""}`)},
		{"unknown field", append(bytes.TrimSuffix(wire, []byte("}")), `,"extra":1}`...)},
		{"trailing data", append(bytes.Clone(wire), ` {}`...)},
		{"bad base64", []byte(`{"format":"` + SignedFormat + `","signer":"!!!","signature":"","schedule":""}`)},
		{"too big", append(bytes.Clone(wire), bytes.Repeat([]byte(" "), MaxSignedSize)...)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := UnmarshalSigned(tc.data); !errors.Is(err, ErrMalformedSigned) {
				t.Errorf("UnmarshalSigned error = %v, want ErrMalformedSigned", err)
			}
		})
	}
}

func TestParsePublicKey(t *testing.T) {
	pub := pubOf(testKey(4))
	b64 := FormatPublicKey(pub)
	for _, in := range []string{b64, strings.TrimRight(b64, "="), hex.EncodeToString(pub), "  " + b64 + "\n"} {
		got, err := ParsePublicKey(in)
		if err != nil || !bytes.Equal(got, pub) {
			t.Errorf("ParsePublicKey(%q) = %x, %v; want %x", in, got, err, pub)
		}
	}
	for _, in := range []string{"", "not a key", FormatPublicKey(pub[:31]), hex.EncodeToString(pub)[:62] + "zz"} {
		if _, err := ParsePublicKey(in); err == nil {
			t.Errorf("ParsePublicKey(%q) accepted", in)
		}
	}
	if a, b := Fingerprint(pub), Fingerprint(pubOf(testKey(5))); a == b || !strings.HasPrefix(a, "ed25519:") || len(a) != len("ed25519:")+16 {
		t.Errorf("fingerprints %q and %q: want distinct ed25519:<16 hex>", a, b)
	}
}

// FuzzUnmarshalSigned checks that no envelope makes UnmarshalSigned or
// Verify panic, and that nothing but the genuine schedule verifies.
func FuzzUnmarshalSigned(f *testing.F) {
	s, err := Parse([]byte(daily("Africa/Johannesburg", `{start: "18:00", end: "20:30"}`)))
	if err != nil {
		f.Fatal(err)
	}
	k := testKey(1)
	sg, err := Sign(s, k)
	if err != nil {
		f.Fatal(err)
	}
	wire, _ := sg.Marshal()
	f.Add(wire)
	f.Add([]byte(`{"format":"bedwe-signed-schedule/1","signer":"AAAA","signature":"","schedule":""}`))
	trusted := [][]byte{pubOf(k)}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := UnmarshalSigned(data)
		if err != nil {
			return
		}
		if _, err := got.Verify(trusted); err == nil && !bytes.Equal(got.Schedule, sg.Schedule) {
			t.Fatalf("a forged schedule verified:\n%s", got.Schedule)
		}
	})
}
