package kube

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/electd/electd/elector"
)

// RecordRun stores r in the election's run Lease (NAME.run), in an
// annotation, with the instant it lapses (now + period by this host's
// clock) in another: the API server expires nothing, and no eviction
// policy can drop it.
func (e *Elector) RecordRun(ctx context.Context, r elector.RunRecord, period time.Duration) error {
	b, err := elector.EncodeRun(r, period)
	if err != nil {
		return err
	}
	name := runName(e.name)
	lapse := e.cfg.Clock.Now().Add(period).UTC().Format(time.RFC3339Nano)
	for {
		cur, err := e.leases().Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			obj := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.cfg.Namespace,
				Annotations: map[string]string{annRun: string(b), annRunLapse: lapse}}}
			_, err = e.leases().Create(ctx, obj, metav1.CreateOptions{})
		case err == nil:
			if cur.Annotations == nil {
				cur.Annotations = map[string]string{}
			}
			cur.Annotations[annRun], cur.Annotations[annRunLapse] = string(b), lapse
			_, err = e.leases().Update(ctx, cur, metav1.UpdateOptions{})
		}
		switch {
		case err == nil:
			return nil
		case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
			continue // written meanwhile: write over the newer version
		}
		err = classify(err)
		e.inst.StoreError("record", err)
		return &elector.StoreError{Op: "record", Err: err, Permanent: isPermanent(err)}
	}
}

// LastRun returns the election's live run record, or ErrNoRun.
func (e *Elector) LastRun(ctx context.Context) (elector.RunRecord, error) {
	cur, err := e.leases().Get(ctx, runName(e.name), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return elector.RunRecord{}, elector.ErrNoRun
	case err != nil:
		err = classify(err)
		e.inst.StoreError("last-run", err)
		return elector.RunRecord{}, &elector.StoreError{Op: "last-run", Err: err, Permanent: isPermanent(err)}
	}
	v, ok := cur.Annotations[annRun]
	if !ok {
		return elector.RunRecord{}, elector.ErrNoRun
	}
	// The record lapses by the recording host's clock; a lapse that does
	// not parse (written by hand) keeps the record.
	if lapse, err := time.Parse(time.RFC3339Nano, cur.Annotations[annRunLapse]); err == nil && !e.cfg.Clock.Now().Before(lapse) {
		return elector.RunRecord{}, elector.ErrNoRun
	}
	return elector.DecodeRun([]byte(v)), nil
}

// ForgetRun deletes the election's run record, if any (`electd lock
// --forget`).
func (e *Elector) ForgetRun(ctx context.Context) error {
	err := e.leases().Delete(ctx, runName(e.name), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		err = classify(err)
		e.inst.StoreError("forget", err)
		return &elector.StoreError{Op: "forget", Err: err, Permanent: isPermanent(err)}
	}
	return nil
}
