package supervisor

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"syscall"
	"time"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/elector"
)

// Campaigner is what the leadership loop needs of an elector.
type Campaigner interface {
	Campaign(ctx context.Context) (*elector.Term, error)
}

// Events receives what the loop does, for metrics. health.Metrics
// implements it; the methods must not block.
type Events interface {
	Acquired(token uint64, waited time.Duration)
	CampaignFailed(err error)
	Lost(reason string)
	ChildStarted()
	ChildExited(outcome string)
	// ChildBackoff reports the streak of the child's failures and the
	// cool-down it gives (see Supervisor.Backoff), at each change.
	ChildBackoff(failures int, coolDown time.Duration)
}

// OnExit says what the leader does when its child exits on its own.
type OnExit string

// On-exit policies.
const (
	// OnExitResign releases leadership and rejoins the queue after the
	// cool-down (CoolDown, growing while the child keeps failing).
	OnExitResign OnExit = "resign"
	// OnExitRestart restarts the child in place, with exponential backoff,
	// while still leading.
	OnExitRestart OnExit = "restart"
	// OnExitExit releases leadership and makes Run return an *ExitError
	// carrying the child's exit code (or 128+signal).
	OnExitExit OnExit = "exit"
)

// ParseOnExit checks an --on-exit value.
func ParseOnExit(s string) (OnExit, error) {
	switch o := OnExit(s); o {
	case OnExitResign, OnExitRestart, OnExitExit:
		return o, nil
	}
	return "", elector.Configf("on-exit", "%q is not one of resign, restart, exit", s)
}

// DefaultCoolDownMax caps the cool-down by default, as Kubernetes caps its
// CrashLoopBackOff: one copy whose child fails at once retries every 5
// minutes at worst, and the others get their turn meanwhile.
const DefaultCoolDownMax = 5 * time.Minute

// Config configures the leadership loop.
type Config struct {
	Elector  Campaigner
	Election string
	ID       string

	// Command to run while leading; empty = readiness-only mode.
	Command []string
	Shell   bool
	// Env is the child's base environment; ELECTD_ELECTION, ELECTD_ID,
	// ELECTD_FENCING_TOKEN and ELECTD_LEADER_SINCE are added to it.
	Env            []string
	Stdout, Stderr io.Writer

	StopSignal syscall.Signal // default SIGTERM
	// StopTimeout is the stop signal's grace. Each term is checked against
	// it before a child starts under it: a term whose timing (Term.Timing)
	// leaves no room for it is refused (see checkTerm).
	StopTimeout time.Duration
	// StopTimeoutDefault says StopTimeout is the default (DefaultStopTimeout
	// of the configured timing: the operator set none). A term whose own
	// timing leaves less room (a negotiated lease, a renewal lag) then runs
	// with the default of its timing rather than being refused.
	StopTimeoutDefault bool
	// Containment asks for a containment mode (see Containment); New
	// resolves the default, ContainAuto, to the strongest this host allows
	// and refuses a mode it does not (an *elector.ConfigError).
	Containment Containment
	OnExit      OnExit        // default OnExitResign
	CoolDown    time.Duration // before rejoining after a resignation; default 1s
	// CoolDownMax caps the cool-down, which doubles with each consecutive
	// failure of the child after the first; a run that lasted at least
	// CoolDownMax ends the streak. Default 5m; never less than CoolDown.
	CoolDownMax time.Duration
	// RestartBackoff is the first delay of OnExitRestart, doubling with
	// each exit up to RestartBackoffMax, and back to RestartBackoff after a
	// run that lasted at least RestartBackoffMax; defaults 100ms and 30s.
	RestartBackoff, RestartBackoffMax time.Duration

	Events Events
	Clock  clock.Clock
	Logger *slog.Logger

	containReason string // why Containment is the mode in force
}

func (c *Config) validate() error {
	if c.Elector == nil {
		return fmt.Errorf("supervisor: no elector")
	}
	if c.OnExit == "" {
		c.OnExit = OnExitResign
	}
	if _, err := ParseOnExit(string(c.OnExit)); err != nil {
		return err
	}
	if c.StopSignal == 0 {
		c.StopSignal = syscall.SIGTERM
	}
	if c.CoolDown == 0 {
		c.CoolDown = time.Second
	}
	if c.CoolDown < 0 {
		return elector.Configf("cool-down", "must not be negative, got %s", c.CoolDown)
	}
	if c.CoolDownMax == 0 {
		c.CoolDownMax = DefaultCoolDownMax
	}
	if c.CoolDownMax < 0 {
		return elector.Configf("cool-down-max", "must not be negative, got %s", c.CoolDownMax)
	}
	c.CoolDownMax = max(c.CoolDownMax, c.CoolDown)
	if c.RestartBackoff <= 0 {
		c.RestartBackoff = 100 * time.Millisecond
	}
	if c.RestartBackoffMax <= 0 {
		c.RestartBackoffMax = 30 * time.Second
	}
	if c.RestartBackoffMax < c.RestartBackoff {
		return elector.Configf("restart-backoff-max", "%s is shorter than the first backoff %s", c.RestartBackoffMax, c.RestartBackoff)
	}
	if c.StopTimeout < 0 {
		return elector.Configf("stop-timeout", "must not be negative, got %s", c.StopTimeout)
	}
	if c.Events == nil {
		c.Events = nopEvents{}
	}
	if len(c.Command) == 0 {
		// Readiness-only: there is no tree to contain.
		c.Containment, c.containReason = ContainNone, "no command"
	} else {
		mode, reason, err := ResolveContainment(c.Containment)
		if err != nil {
			return err
		}
		if mode == ContainPgroup && os.Getpid() == 1 {
			reason += "; electd is PID 1 of its PID namespace, so the kernel kills the whole tree with it, even on kill -9"
		}
		if mode == ContainPgroup && orphanRule.strangers != "" {
			reason += "; the sweep knows the child's orphans only by the ELECTD_FENCING_TOKEN in their environment (a daemon that overwrites it escapes), since " +
				orphanRule.strangers
		}
		c.Containment, c.containReason = mode, reason
	}
	c.Clock = clock.OrReal(c.Clock)
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return nil
}

type nopEvents struct{}

func (nopEvents) Acquired(uint64, time.Duration)  {}
func (nopEvents) CampaignFailed(error)            {}
func (nopEvents) Lost(string)                     {}
func (nopEvents) ChildStarted()                   {}
func (nopEvents) ChildExited(string)              {}
func (nopEvents) ChildBackoff(int, time.Duration) {}

// ExitError is returned by Run when the child exited under OnExitExit.
type ExitError struct{ Status ExitStatus }

func (e *ExitError) Error() string {
	return fmt.Sprintf("child exited with code %d (%s)", e.Status.ExitCode(), e.Status.Outcome())
}

// Code is the exit code electd should exit with.
func (e *ExitError) Code() int { return e.Status.ExitCode() }
