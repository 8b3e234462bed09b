package schedule

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// SignedFormat tags the JSON encoding of a Signed envelope.
const SignedFormat = "bedwe-signed-schedule/1"

// signingContext is prefixed to the schedule bytes before signing, so a
// signature made for a schedule can never be replayed as a signature over
// some other kind of message signed with the same node key.
const signingContext = "bedwe-schedule-signature/1\n"

// MaxSignedSize bounds the encoded envelope UnmarshalSigned accepts: a
// MaxFileSize schedule in base64 plus room for the key and signature.
const MaxSignedSize = MaxFileSize/3*4 + 4096

// The errors Verify and UnmarshalSigned wrap; test with errors.Is.
var (
	// ErrUntrustedSigner: the signer is not among the trusted keys.
	ErrUntrustedSigner = errors.New("schedule signer is not trusted")
	// ErrBadSignature: the signature does not match the signer and bytes.
	ErrBadSignature = errors.New("bad schedule signature")
	// ErrMalformedSigned: the envelope or the schedule inside is unreadable.
	ErrMalformedSigned = errors.New("malformed signed schedule")
)

// Signed is a schedule as published on pubsub: the exact Marshal output,
// the Ed25519 public key of its signer and the signature over the bytes.
//
// Trust model. A node trusts the Ed25519 public keys listed in its own
// configuration, and nothing else: not the peer that relayed the message,
// not the key that signed the schedule it holds, not a key named inside a
// schedule. A signed schedule is accepted only if its signer is one of those
// keys and the signature covers the exact bytes carried. Typically the list
// holds the key of the operator who publishes timetables (and the node's own
// key, so `bedwe schedule publish` on that node round-trips). A node with an
// empty list accepts no gossiped schedule; it may still load a local file,
// which the operator put there. Which of two accepted schedules wins is
// decided afterwards by Newer (issued_at), not by the signer. Keys are not
// revoked in band: removing a key from the configuration is the revocation.
type Signed struct {
	// Schedule is the bedwe-schedule/1 document (Schedule.Marshal output).
	Schedule []byte
	// Signer is the raw 32-byte Ed25519 public key that signed it.
	Signer []byte
	// Signature is the 64-byte Ed25519 signature of the line
	// "bedwe-schedule-signature/1" (with its newline) followed by Schedule.
	Signature []byte
}

// Sign prints s with Marshal and signs the bytes with priv (a raw Ed25519
// key; a libp2p node gets one from its key's Raw()). It refuses a schedule
// that would not parse back, so nothing is published that every verifier
// would reject.
func Sign(s *Schedule, priv ed25519.PrivateKey) (*Signed, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("sign schedule: private key is %d bytes, want %d (raw Ed25519)", len(priv), ed25519.PrivateKeySize)
	}
	data, err := s.Marshal()
	if err != nil {
		return nil, fmt.Errorf("sign schedule: %w", err)
	}
	if _, err := Parse(data); err != nil {
		return nil, fmt.Errorf("sign schedule: it does not parse back: %w", err)
	}
	pub := priv.Public().(ed25519.PublicKey)
	return &Signed{
		Schedule:  data,
		Signer:    bytes.Clone(pub),
		Signature: ed25519.Sign(priv, signedMessage(data)),
	}, nil
}

func signedMessage(data []byte) []byte {
	msg := make([]byte, 0, len(signingContext)+len(data))
	return append(append(msg, signingContext...), data...)
}

// Verify checks the envelope and returns the schedule inside. It checks, in
// order: the shape of key and signature, that the signer is one of trusted
// (raw 32-byte Ed25519 public keys; cheap, so untrusted spam costs no
// signature check), the signature, and that the schedule parses. The errors
// wrap ErrMalformedSigned, ErrUntrustedSigner or ErrBadSignature.
func (sg *Signed) Verify(trusted [][]byte) (*Schedule, error) {
	if len(sg.Signer) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("verify schedule: signer key is %d bytes, want %d: %w", len(sg.Signer), ed25519.PublicKeySize, ErrMalformedSigned)
	}
	if len(sg.Signature) != ed25519.SignatureSize {
		return nil, fmt.Errorf("verify schedule from %s: signature is %d bytes, want %d: %w", Fingerprint(sg.Signer), len(sg.Signature), ed25519.SignatureSize, ErrMalformedSigned)
	}
	if !trustedKey(trusted, sg.Signer) {
		if len(trusted) == 0 {
			return nil, fmt.Errorf("verify schedule from %s: no trusted signers configured: %w", Fingerprint(sg.Signer), ErrUntrustedSigner)
		}
		return nil, fmt.Errorf("verify schedule from %s: %w", Fingerprint(sg.Signer), ErrUntrustedSigner)
	}
	if !ed25519.Verify(sg.Signer, signedMessage(sg.Schedule), sg.Signature) {
		return nil, fmt.Errorf("verify schedule from %s: %w", Fingerprint(sg.Signer), ErrBadSignature)
	}
	s, err := Parse(sg.Schedule)
	if err != nil {
		return nil, fmt.Errorf("verify schedule from %s: %w: %w", Fingerprint(sg.Signer), ErrMalformedSigned, err)
	}
	return s, nil
}

func trustedKey(trusted [][]byte, k []byte) bool {
	for _, t := range trusted {
		if bytes.Equal(t, k) {
			return true
		}
	}
	return false
}

// signedWire is the JSON shape of a Signed; []byte fields are base64.
type signedWire struct {
	Format    string `json:"format"`
	Signer    []byte `json:"signer"`
	Signature []byte `json:"signature"`
	Schedule  []byte `json:"schedule"`
}

// Marshal encodes the envelope as JSON:
//
//	{"format":"bedwe-signed-schedule/1","signer":"<base64>","signature":"<base64>","schedule":"<base64>"}
func (sg *Signed) Marshal() ([]byte, error) {
	b, err := json.Marshal(signedWire{Format: SignedFormat, Signer: sg.Signer, Signature: sg.Signature, Schedule: sg.Schedule})
	if err != nil {
		return nil, fmt.Errorf("marshal signed schedule: %w", err)
	}
	return b, nil
}

// UnmarshalSigned decodes what Marshal produced. It checks the format tag
// and the size bound only; call Verify before trusting the content.
func UnmarshalSigned(data []byte) (*Signed, error) {
	if len(data) > MaxSignedSize {
		return nil, fmt.Errorf("unmarshal signed schedule: %d bytes, more than the %d allowed: %w", len(data), MaxSignedSize, ErrMalformedSigned)
	}
	var w signedWire
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return nil, fmt.Errorf("unmarshal signed schedule: %w: %w", ErrMalformedSigned, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("unmarshal signed schedule: trailing data after the envelope: %w", ErrMalformedSigned)
	}
	if w.Format != SignedFormat {
		return nil, fmt.Errorf("unmarshal signed schedule: format %q, want %q: %w", w.Format, SignedFormat, ErrMalformedSigned)
	}
	return &Signed{Schedule: w.Schedule, Signer: w.Signer, Signature: w.Signature}, nil
}

// Fingerprint names a public key in logs and errors: "ed25519:" and the
// first 8 bytes of its SHA-256 in hex.
func Fingerprint(pub []byte) string {
	sum := sha256.Sum256(pub)
	return "ed25519:" + hex.EncodeToString(sum[:8])
}

// FormatPublicKey renders a raw Ed25519 public key as configuration text:
// standard base64 (44 characters).
func FormatPublicKey(pub []byte) string { return base64.StdEncoding.EncodeToString(pub) }

// ParsePublicKey reads a trusted key from configuration: standard or URL
// base64 (padded or not) or 64 hex digits, of a raw 32-byte Ed25519 public
// key.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	s = strings.TrimSpace(s)
	var b []byte
	var err error
	switch {
	case len(s) == 2*ed25519.PublicKeySize:
		b, err = hex.DecodeString(s)
	default:
		b, err = base64.StdEncoding.DecodeString(s)
		if err != nil {
			b, err = base64.RawStdEncoding.DecodeString(s)
		}
		if err != nil {
			b, err = base64.URLEncoding.DecodeString(s)
		}
		if err != nil {
			b, err = base64.RawURLEncoding.DecodeString(s)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("public key %q: want base64 or hex of a 32-byte Ed25519 key", s)
	}
	if len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("public key %q: %d bytes, want %d (raw Ed25519)", s, len(b), ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}
