package health

import (
	"context"
	"fmt"
	"strings"

	"github.com/electd/electd/elector/backend"
)

// storeMemberJSON is one entry of /healthz's store_members.
type storeMemberJSON struct {
	Endpoint string         `json:"endpoint"`
	ID       string         `json:"id,omitempty"`   // "" until it first answered
	Name     string         `json:"name,omitempty"` // "" when not known
	Answers  bool           `json:"answers"`
	Error    string         `json:"error,omitempty"`  // why it did not answer
	Leader   *memberRefJSON `json:"leader"`           // the leader it follows; null: none
	InUse    bool           `json:"in_use"`           // the store's requests go to it
	Streams  int            `json:"streams"`          // watches and keepalives open on it
	Quorum   int            `json:"quorum,omitempty"` // of independent servers: how many must answer
}

// memberRefJSON names a member.
type memberRefJSON struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

// storeMembers is what Config.StoreMembers reports; nil, nil without one.
func (s *Server) storeMembers(ctx context.Context) ([]backend.Member, error) {
	if s.cfg.StoreMembers == nil {
		return nil, nil
	}
	return s.cfg.StoreMembers(ctx)
}

func membersJSON(ms []backend.Member) []storeMemberJSON {
	if len(ms) == 0 {
		return nil
	}
	out := make([]storeMemberJSON, len(ms))
	for i, m := range ms {
		out[i] = storeMemberJSON{Endpoint: m.Endpoint, ID: m.ID, Name: m.Name, Answers: m.Answers, Error: m.Error,
			InUse: m.InUse, Streams: m.Streams, Quorum: m.Quorum}
		if m.Leader != "" {
			out[i].Leader = &memberRefJSON{ID: m.Leader, Name: m.LeaderName}
		}
	}
	return out
}

// membersHealthy is nil while at least one member that the store's
// requests go to answers with a leader: through it they reach a quorum.
// A member without a leader (cut off from its peers) or down, beside one
// like that, is shown in store_members but fails nothing. Otherwise the
// error says what each member lacks.
//
// For the independent servers of a quorum (Member.Quorum) it is nil while
// a quorum of them answer.
func membersHealthy(ms []backend.Member) error {
	if len(ms) > 0 && ms[0].Quorum > 0 {
		return quorumHealthy(ms)
	}
	var why []string
	for _, m := range ms {
		if m.InUse && m.Answers && m.Leader != "" {
			return nil
		}
		name := m.Endpoint
		if m.Name != "" {
			name += " (" + m.Name + ")"
		}
		switch {
		case !m.Answers:
			why = append(why, name+" does not answer")
		case m.Leader == "":
			why = append(why, name+" has no leader")
		default:
			why = append(why, name+" is not in use")
		}
	}
	return fmt.Errorf("no store member in use answers with a leader: %s", strings.Join(why, "; "))
}

// quorumHealthy is nil while a quorum of the independent servers ms
// answer; else it names each that does not.
func quorumHealthy(ms []backend.Member) error {
	answer := 0
	var why []string
	for _, m := range ms {
		if m.Answers {
			answer++
			continue
		}
		why = append(why, m.Endpoint+" does not answer: "+m.Error)
	}
	if answer >= ms[0].Quorum {
		return nil
	}
	return fmt.Errorf("%d of %d servers answer, a quorum is %d: %s", answer, len(ms), ms[0].Quorum, strings.Join(why, "; "))
}
