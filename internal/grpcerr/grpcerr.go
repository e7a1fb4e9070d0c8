// Package grpcerr is the gRPC error boundary. Servers install its
// interceptors so handlers return plain domain errors (package errdefs) and
// never build statuses by hand; clients install its interceptors so a status
// from the wire becomes a domain error again and errors.Is, errors.As and
// errdefs.FieldOf keep working across the process boundary.
package grpcerr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolscope/toolscope/internal/errdefs"
)

var classes = []struct {
	sentinel error
	code     codes.Code
}{
	{errdefs.ErrInvalidArgument, codes.InvalidArgument},
	{errdefs.ErrNotFound, codes.NotFound},
	{errdefs.ErrAlreadyExists, codes.AlreadyExists},
	{errdefs.ErrFailedPrecondition, codes.FailedPrecondition},
	{errdefs.ErrUnavailable, codes.Unavailable},
	{errdefs.ErrUnauthenticated, codes.Unauthenticated},
	{errdefs.ErrPermissionDenied, codes.PermissionDenied},
	{errdefs.ErrResourceExhausted, codes.ResourceExhausted},
	{errdefs.ErrUnimplemented, codes.Unimplemented},
	{context.Canceled, codes.Canceled},
	{context.DeadlineExceeded, codes.DeadlineExceeded},
}

// internalMessage is all a client learns of an unclassified error; the
// server interceptors log the detail, which may hold SQL or file paths.
const internalMessage = "internal error; the orchestrator's log has the details"

// ToStatus converts a domain error to a gRPC status error. A FieldError
// carries its field as a google.rpc.BadRequest detail. Errors that are
// already statuses pass through; anything unclassified is Internal, with a
// generic message.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	code := codes.Internal
	for _, c := range classes {
		if errors.Is(err, c.sentinel) {
			code = c.code
			break
		}
	}
	msg := err.Error()
	if code == codes.Internal {
		msg = internalMessage
	}
	st := status.New(code, msg)
	var fe *errdefs.FieldError
	if errors.As(err, &fe) {
		withDetail, derr := st.WithDetails(&errdetails.BadRequest{
			FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: fe.Field, Description: fe.Reason}},
		})
		if derr == nil {
			st = withDetail
		}
	}
	return st.Err()
}

// FromStatus converts a gRPC status error back to a domain error. The
// message is kept as it was; the error matches the errdefs sentinel of its
// code, and a BadRequest detail becomes an *errdefs.FieldError.
func FromStatus(err error) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() == codes.OK {
		return err
	}
	re := &remoteError{status: st}
	for _, c := range classes {
		if c.code == st.Code() {
			re.class = c.sentinel
			break
		}
	}
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
			v := br.GetFieldViolations()[0]
			re.field = &errdefs.FieldError{Field: v.GetField(), Reason: v.GetDescription()}
		}
	}
	return re
}

// remoteError is a domain error rebuilt from a status.
type remoteError struct {
	class  error               // the errdefs sentinel of the code, if any
	field  *errdefs.FieldError // from a BadRequest detail, if any
	status *status.Status
}

func (e *remoteError) Error() string { return e.status.Message() }

func (e *remoteError) Is(target error) bool { return e.class != nil && target == e.class }

// Unwrap exposes the FieldError, so errors.As and errdefs.FieldOf find it.
func (e *remoteError) Unwrap() error {
	if e.field == nil {
		return nil
	}
	return e.field
}

// GRPCStatus lets status.FromError recover the original status.
func (e *remoteError) GRPCStatus() *status.Status { return e.status }

// ServerOptions returns the interceptors that convert handler errors to
// statuses and turn handler panics into Internal errors logged to log (nil
// discards).
func ServerOptions(log *slog.Logger) []grpc.ServerOption {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
			defer recoverPanic(log, info.FullMethod, &err)
			resp, err = h(ctx, req)
			return resp, toStatusLogged(log, info.FullMethod, err)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
			defer recoverPanic(log, info.FullMethod, &err)
			return toStatusLogged(log, info.FullMethod, h(srv, ss))
		}),
	}
}

func toStatusLogged(log *slog.Logger, method string, err error) error {
	st := ToStatus(err)
	if status.Code(st) == codes.Internal && status.Convert(st).Message() == internalMessage {
		log.Error("internal error in gRPC handler", "method", method, "error", err.Error())
	}
	return st
}

func recoverPanic(log *slog.Logger, method string, err *error) {
	if r := recover(); r != nil {
		log.Error("panic in gRPC handler", "method", method, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		*err = status.Errorf(codes.Internal, "internal error in %s", method)
	}
}

// DialOptions returns the client interceptors that convert statuses back
// to domain errors.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return FromStatus(invoker(ctx, method, req, reply, cc, opts...))
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			cs, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil {
				return nil, FromStatus(err)
			}
			return &clientStream{ClientStream: cs}, nil
		}),
	}
}

type clientStream struct{ grpc.ClientStream }

func (s *clientStream) RecvMsg(m any) error { return FromStatus(s.ClientStream.RecvMsg(m)) }

func (s *clientStream) SendMsg(m any) error { return FromStatus(s.ClientStream.SendMsg(m)) }
