package plugin

import (
	"context"
	"io"
	"os"
	"sync"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/fleet/plugin/internal/pb"
)

// ProtocolVersion is the version of the plugin protocol: the messages of
// backend.proto and what they mean. A host starts only plugins of its
// version.
const ProtocolVersion = 1

// handshake is what host and plugin agree on before anything else. The
// cookie is no security: it tells a plugin binary started by hand that it
// is one.
var handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "CIKIT_BACKEND_PLUGIN",
	MagicCookieValue: "8d1f3c2e-cikit-fleet-backend",
}

// pluginName is the one plugin a backend plugin binary serves.
const pluginName = "backend"

// hostPoll is how often a plugin checks that its host still runs.
const hostPoll = time.Second

// Serve serves impl to the host that started this process, and returns
// when the host has stopped it (Host.Close). If impl is also an io.Closer,
// Serve closes it then, before returning; the host waits a short while
// for the process to exit before it kills it. Call Serve from a plugin
// binary's main; run by hand, the binary says it is a plugin and exits.
//
// impl receives each call's context with the host's deadline and
// cancellation, and must return soon after it ends.
//
// A host that is killed cannot stop its plugin, and go-plugin would leave
// it running, with runners nobody manages. So the plugin watches its
// parent process: when the host is gone, Serve closes impl and exits the
// process with status 1.
func Serve(impl fleet.Backend) {
	log := NewLogger()
	var once sync.Once
	closeImpl := func() {
		once.Do(func() {
			if c, ok := impl.(io.Closer); ok {
				if err := c.Close(); err != nil {
					log.Error("plugin: closing the backend", "error", err)
				}
			}
		})
	}
	stop, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		if watchHost(os.Getppid(), stop) {
			log.Error("plugin: the host process is gone; stopping")
			closeImpl()
			os.Exit(1)
		}
	}()
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: handshake,
		Plugins:         goplugin.PluginSet{pluginName: &backendPlugin{impl: impl}},
		GRPCServer:      goplugin.DefaultGRPCServer,
		Logger:          newHCLogAdapter(newWireHandler(stderr)),
	})
	close(stop)
	<-watched
	closeImpl()
}

// watchHost reports, by returning true, that the parent process host has
// gone: this process was given to another parent. It returns false once
// stop is closed.
func watchHost(host int, stop <-chan struct{}) bool {
	t := time.NewTicker(hostPoll)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return false
		case <-t.C:
			if os.Getppid() != host {
				return true
			}
		}
	}
}

// backendPlugin is the go-plugin plugin: in the plugin process it serves
// impl over gRPC, in the host it dispenses a remote.
type backendPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	impl fleet.Backend
}

func (p *backendPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterBackendServer(s, &grpcServer{impl: p.impl})
	return nil
}

// GRPCClient returns the host's side of the connection. ctx ends when the
// plugin process has exited.
func (p *backendPlugin) GRPCClient(ctx context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &remote{c: pb.NewBackendClient(c), exited: ctx.Done()}, nil
}

// grpcServer answers the host's calls with the plugin's Backend.
type grpcServer struct {
	pb.UnimplementedBackendServer
	impl fleet.Backend
}

// errNothing answers a call the backend answered with neither a value nor
// an error.
func errNothing(method string) error {
	return status.Errorf(codes.Internal, "plugin: the backend's %s returned neither a result nor an error", method)
}

func (s *grpcServer) Info(ctx context.Context, _ *pb.InfoRequest) (*pb.BackendInfo, error) {
	info, err := s.impl.Info(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	if info == nil {
		return nil, errNothing("Info")
	}
	return encodeInfo(info), nil
}

func (s *grpcServer) Provision(ctx context.Context, req *pb.ProvisionRequest) (*pb.Instance, error) {
	inst, err := s.impl.Provision(ctx, decodeRequest(req))
	if err != nil {
		return nil, toStatus(err)
	}
	if inst == nil {
		return nil, errNothing("Provision")
	}
	return encodeInstance(inst), nil
}

func (s *grpcServer) GetInstance(ctx context.Context, req *pb.GetInstanceRequest) (*pb.Instance, error) {
	inst, err := s.impl.Instance(ctx, req.GetId())
	if err != nil {
		return nil, toStatus(err)
	}
	if inst == nil {
		return nil, errNothing("Instance")
	}
	return encodeInstance(inst), nil
}

func (s *grpcServer) ListInstances(ctx context.Context, _ *pb.ListInstancesRequest) (*pb.ListInstancesResponse, error) {
	list, err := s.impl.Instances(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &pb.ListInstancesResponse{Instances: make([]*pb.Instance, 0, len(list))}
	for _, inst := range list {
		resp.Instances = append(resp.Instances, encodeInstance(inst))
	}
	return resp, nil
}

func (s *grpcServer) Destroy(ctx context.Context, req *pb.DestroyRequest) (*pb.DestroyResponse, error) {
	if err := s.impl.Destroy(ctx, req.GetId()); err != nil {
		return nil, toStatus(err)
	}
	return &pb.DestroyResponse{}, nil
}

// remote is a plugin's Backend as the host calls it, over one connection
// to one plugin process.
type remote struct {
	c pb.BackendClient
	// exited is closed when the plugin process has exited.
	exited <-chan struct{}
}

var _ fleet.Backend = (*remote)(nil)

func (r *remote) Info(ctx context.Context) (*fleet.BackendInfo, error) {
	m, err := r.c.Info(ctx, &pb.InfoRequest{})
	if err != nil {
		return nil, fromStatus(ctx, "Info", err)
	}
	return decodeInfo(m), nil
}

func (r *remote) Provision(ctx context.Context, req *fleet.ProvisionRequest) (*fleet.Instance, error) {
	m, err := r.c.Provision(ctx, encodeRequest(req))
	if err != nil {
		return nil, fromStatus(ctx, "Provision", err)
	}
	return decodeInstance(m), nil
}

func (r *remote) Instance(ctx context.Context, id string) (*fleet.Instance, error) {
	m, err := r.c.GetInstance(ctx, &pb.GetInstanceRequest{Id: id})
	if err != nil {
		return nil, fromStatus(ctx, "Instance", err)
	}
	return decodeInstance(m), nil
}

func (r *remote) Instances(ctx context.Context) ([]*fleet.Instance, error) {
	m, err := r.c.ListInstances(ctx, &pb.ListInstancesRequest{})
	if err != nil {
		return nil, fromStatus(ctx, "Instances", err)
	}
	list := make([]*fleet.Instance, 0, len(m.GetInstances()))
	for _, inst := range m.GetInstances() {
		list = append(list, decodeInstance(inst))
	}
	return list, nil
}

func (r *remote) Destroy(ctx context.Context, id string) error {
	if _, err := r.c.Destroy(ctx, &pb.DestroyRequest{Id: id}); err != nil {
		return fromStatus(ctx, "Destroy", err)
	}
	return nil
}
