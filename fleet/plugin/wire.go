package plugin

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/fleet/plugin/internal/pb"
)

// errorDomain is the ErrorInfo domain of the reasons below.
const errorDomain = "fleet.cikit"

// wireErrors are the errors whose meaning crosses the boundary: each
// travels as a status code plus an ErrorInfo reason, and comes out on the
// host's side as an error that matches it with errors.Is. The first match
// of a plugin's error decides, so more specific errors come first.
var wireErrors = []struct {
	err    error
	code   codes.Code
	reason string
}{
	{cikit.ErrNotFound, codes.NotFound, "NOT_FOUND"},
	{fleet.ErrLabelsUnsupported, codes.InvalidArgument, "LABELS_UNSUPPORTED"},
	{fleet.ErrCapacity, codes.ResourceExhausted, "CAPACITY"},
	{context.DeadlineExceeded, codes.DeadlineExceeded, "DEADLINE_EXCEEDED"},
	{context.Canceled, codes.Canceled, "CANCELED"},
}

// toStatus is the plugin's side: err as a gRPC status that keeps its
// message and, for the errors above, its meaning.
func toStatus(err error) error {
	for _, w := range wireErrors {
		if !errors.Is(err, w.err) {
			continue
		}
		st, detailErr := status.New(w.code, err.Error()).WithDetails(&errdetails.ErrorInfo{Domain: errorDomain, Reason: w.reason})
		if detailErr != nil {
			// Only a detail that cannot be marshalled fails, and ErrorInfo
			// always can.
			panic(detailErr)
		}
		return st.Err()
	}
	return status.Error(codes.Unknown, err.Error())
}

// RemoteError is an error a plugin's backend returned, as the host sees
// it: the plugin's message, and, when the error meant one of the errors
// the protocol carries (cikit.ErrNotFound, fleet.ErrLabelsUnsupported,
// fleet.ErrCapacity, context.Canceled, context.DeadlineExceeded), a match
// for that error with errors.Is.
type RemoteError struct {
	// Message is the error's text in the plugin.
	Message string
	// Err is the error it meant; nil for others.
	Err error
}

func (e *RemoteError) Error() string { return e.Message }

// Unwrap returns the error the plugin's error meant, if any.
func (e *RemoteError) Unwrap() error { return e.Err }

// fromStatus is the host's side of toStatus. ctx is the call's: when it
// has ended, the error is its error, whatever the plugin said or did not
// get to say.
func fromStatus(ctx context.Context, method string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("plugin: %s: %w", method, ctx.Err())
	}
	st := status.Convert(err)
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.Domain != errorDomain {
			continue
		}
		for _, w := range wireErrors {
			if w.reason == info.Reason {
				return &RemoteError{Message: st.Message(), Err: w.err}
			}
		}
	}
	switch st.Code() {
	case codes.Unknown:
		return &RemoteError{Message: st.Message()}
	case codes.DeadlineExceeded:
		// The plugin's copy of the deadline passed a moment before ours.
		return fmt.Errorf("plugin: %s: %w", method, context.DeadlineExceeded)
	case codes.Unavailable, codes.Canceled:
		// The connection broke (the plugin exited) or was closed under the
		// call; the caller's context is intact.
		return fmt.Errorf("%w: %s: %s", ErrUnavailable, method, st.Message())
	}
	return fmt.Errorf("plugin: %s: %s", method, st.Message())
}

func encodeInfo(info *fleet.BackendInfo) *pb.BackendInfo {
	return &pb.BackendInfo{
		Name:        info.Name,
		Labels:      info.Labels,
		AnyLabels:   info.Labels == nil,
		MaxRunners:  int64(info.MaxRunners),
		StartupHint: durationpb.New(info.StartupHint),
		CostPerHour: info.CostPerHour,
		Isolation:   info.Isolation,
	}
}

func decodeInfo(m *pb.BackendInfo) *fleet.BackendInfo {
	info := &fleet.BackendInfo{
		Name:        m.GetName(),
		Labels:      m.GetLabels(),
		MaxRunners:  int(m.GetMaxRunners()),
		StartupHint: m.GetStartupHint().AsDuration(),
		CostPerHour: m.GetCostPerHour(),
		Isolation:   m.GetIsolation(),
	}
	switch {
	case m.GetAnyLabels():
		info.Labels = nil
	case info.Labels == nil:
		// No labels at all, which is not "any".
		info.Labels = []string{}
	}
	return info
}

func encodeRequest(r *fleet.ProvisionRequest) *pb.ProvisionRequest {
	return &pb.ProvisionRequest{
		Id:                r.ID,
		Pool:              r.Pool,
		Labels:            r.Labels,
		Server:            r.Server,
		RegistrationToken: r.RegistrationToken,
		Ephemeral:         r.Ephemeral,
	}
}

func decodeRequest(m *pb.ProvisionRequest) *fleet.ProvisionRequest {
	return &fleet.ProvisionRequest{
		ID:                m.GetId(),
		Pool:              m.GetPool(),
		Labels:            m.GetLabels(),
		Server:            m.GetServer(),
		RegistrationToken: m.GetRegistrationToken(),
		Ephemeral:         m.GetEphemeral(),
	}
}

func encodeInstance(i *fleet.Instance) *pb.Instance {
	m := &pb.Instance{
		Id:        i.ID,
		Pool:      i.Pool,
		Labels:    i.Labels,
		Ephemeral: i.Ephemeral,
		State:     string(i.State),
		Message:   i.Message,
	}
	if !i.Created.IsZero() {
		m.Created = timestamppb.New(i.Created)
	}
	return m
}

func decodeInstance(m *pb.Instance) *fleet.Instance {
	i := &fleet.Instance{
		ID:        m.GetId(),
		Pool:      m.GetPool(),
		Labels:    m.GetLabels(),
		Ephemeral: m.GetEphemeral(),
		State:     fleet.InstanceState(m.GetState()),
		Message:   m.GetMessage(),
	}
	if m.GetCreated() != nil {
		i.Created = m.GetCreated().AsTime()
	}
	return i
}
