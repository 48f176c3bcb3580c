package testenv

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Slot returns the hash slot of key (CRC16 of the key, or of its {hash
// tag}, modulo 16384), as CLUSTER KEYSLOT computes it.
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16 // CRC-16/XMODEM: polynomial 0x1021, initial 0
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % clusterSlots
}

// keyInSlot returns testenv's probe key of slot, "testenv:probe:{TAG}"
// (slot in range: rangeOf checked it).
func keyInSlot(slot int) string {
	for i := 0; ; i++ {
		if tag := strconv.Itoa(i); Slot(tag) == slot {
			return "testenv:probe:{" + tag + "}"
		}
	}
}

// slotRange is one line of CLUSTER SLOTS: a range, its master and its
// replicas (sorted), by address.
type slotRange struct {
	start, end int
	master     string
	replicas   []string
}

func (r slotRange) equal(o slotRange) bool {
	return r.start == o.start && r.end == o.end && r.master == o.master && slices.Equal(r.replicas, o.replicas)
}

func (r slotRange) String() string {
	return fmt.Sprintf("%d-%d:%s%v", r.start, r.end, r.master, r.replicas)
}

// slotMap is a node's CLUSTER SLOTS, sorted by start.
type slotMap []slotRange

func (m slotMap) rangeOf(slot int) slotRange {
	for _, r := range m {
		if r.start <= slot && slot <= r.end {
			return r
		}
	}
	return slotRange{start: slot, end: slot, master: "(nobody)"}
}

func (m slotMap) has(addr string) bool {
	for _, r := range m {
		if r.master == addr || slices.Contains(r.replicas, addr) {
			return true
		}
	}
	return false
}

// view reads n's slot map.
func (c *Cluster) view(ctx context.Context, n *RedisNode) (slotMap, error) {
	slots, err := n.admin.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("cluster slots of %s: %w", n, err)
	}
	var m slotMap
	for _, s := range slots {
		if len(s.Nodes) == 0 {
			continue
		}
		r := slotRange{start: s.Start, end: s.End, master: s.Nodes[0].Addr}
		for _, rep := range s.Nodes[1:] {
			r.replicas = append(r.replicas, rep.Addr)
		}
		slices.Sort(r.replicas)
		m = append(m, r)
	}
	slices.SortFunc(m, func(a, b slotRange) int { return a.start - b.start })
	return m, nil
}
