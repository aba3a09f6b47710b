package molt

import (
	"crypto/rand"
	"encoding/binary"
	"strings"
	"sync"
	"time"
)

// Clock tells the time. Domain code never reads the wall clock directly.
type Clock interface{ Now() time.Time }

// SystemClock is the real clock, in UTC.
type SystemClock struct{}

// Now returns the current time in UTC.
func (SystemClock) Now() time.Time { return time.Now().UTC() }

// ManualClock is a clock tests move by hand. It is safe for concurrent use.
type ManualClock struct {
	mu sync.Mutex
	t  time.Time
}

// NewManualClock returns a ManualClock set to t.
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{t: t.UTC()} }

// Now returns the clock's current time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// IDs generates identifiers.
type IDs interface{ NewID() string }

// SortableIDs makes 26-character, lower-case ids whose byte order is their creation
// order (48-bit millisecond time, then a per-millisecond sequence seeded at random).
// Newest-first listings sort by id descending, which keeps cursors stable under
// concurrent inserts: a new id is always greater than every id already handed out
// by the same generator, and sorts above any cursor taken earlier.
type SortableIDs struct {
	Clock Clock

	mu   sync.Mutex
	last uint64 // ms of the last id
	seq  uint64 // 80-bit tail, low 64 bits
	hi   uint16 // 80-bit tail, high 16 bits
}

const crockford = "0123456789abcdefghjkmnpqrstvwxyz"

// NewID returns a new id.
func (g *SortableIDs) NewID() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var clk Clock = SystemClock{}
	if g.Clock != nil {
		clk = g.Clock
	}
	ms := uint64(clk.Now().UnixMilli())
	if ms <= g.last {
		ms = g.last
		g.seq++
		if g.seq == 0 {
			g.hi++
		}
	} else {
		var b [10]byte
		_, _ = rand.Read(b[:])
		g.hi = binary.BigEndian.Uint16(b[:2]) >> 1 // leave room to count up
		g.seq = binary.BigEndian.Uint64(b[2:])
	}
	g.last = ms
	// 128 bits: 48 ms + 16 hi + 64 seq, written as 26 base32 characters.
	var raw [16]byte
	binary.BigEndian.PutUint64(raw[0:8], ms<<16|uint64(g.hi))
	binary.BigEndian.PutUint64(raw[8:16], g.seq)
	return encode32(raw)
}

func encode32(raw [16]byte) string {
	var sb strings.Builder
	sb.Grow(26)
	// 130 bits of room for 128: prefix two zero bits.
	var acc uint32
	bits := 2
	for _, b := range raw {
		acc = acc<<8 | uint32(b)
		bits += 8
		for bits >= 5 {
			bits -= 5
			sb.WriteByte(crockford[(acc>>uint(bits))&31])
		}
	}
	return sb.String()
}
