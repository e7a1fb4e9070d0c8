package api

import (
	"context"

	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/access"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
)

type authServer struct {
	pb.UnimplementedAuthServiceServer
	svc *service.Service
}

func (h *authServer) CreateAPIToken(ctx context.Context, req *pb.CreateAPITokenRequest) (*pb.CreateAPITokenResponse, error) {
	role := model.Role("")
	if req.GetRole() != pb.Role_ROLE_UNSPECIFIED {
		var ok bool
		if role, ok = fromRole(req.GetRole()); !ok {
			return nil, errdefs.InvalidField("role", "unknown role %d", req.GetRole())
		}
	}
	if err := req.GetTtl().CheckValid(); req.Ttl != nil && err != nil {
		return nil, errdefs.InvalidField("ttl", "%v", err)
	}
	tok, secret, err := h.svc.CreateAPIToken(ctx, req.GetName(), role, req.GetTtl().AsDuration())
	if err != nil {
		return nil, err
	}
	return &pb.CreateAPITokenResponse{ApiToken: toAPIToken(tok), Secret: secret}, nil
}

func (h *authServer) ListAPITokens(ctx context.Context, _ *pb.ListAPITokensRequest) (*pb.ListAPITokensResponse, error) {
	list, err := h.svc.ListAPITokens(ctx)
	if err != nil {
		return nil, err
	}
	out := &pb.ListAPITokensResponse{}
	for _, t := range list {
		out.ApiTokens = append(out.ApiTokens, toAPIToken(t))
	}
	return out, nil
}

func (h *authServer) RevokeAPIToken(ctx context.Context, req *pb.RevokeAPITokenRequest) (*pb.RevokeAPITokenResponse, error) {
	tok, err := h.svc.RevokeAPIToken(ctx, req.GetApiToken())
	if err != nil {
		return nil, err
	}
	return &pb.RevokeAPITokenResponse{ApiToken: toAPIToken(tok)}, nil
}

func (h *authServer) WhoAmI(ctx context.Context, _ *pb.WhoAmIRequest) (*pb.WhoAmIResponse, error) {
	a, ok := model.ActorFrom(ctx)
	if !ok {
		return nil, errdefs.ErrUnauthenticated
	}
	return &pb.WhoAmIResponse{Name: a.Name, Role: toRole(a.Role), Method: access.MethodFrom(ctx)}, nil
}

var roles = map[model.Role]pb.Role{
	model.RoleViewer: pb.Role_ROLE_VIEWER,
	model.RoleMember: pb.Role_ROLE_MEMBER,
	model.RoleAdmin:  pb.Role_ROLE_ADMIN,
}

func toRole(r model.Role) pb.Role { return roles[r] }

func fromRole(r pb.Role) (model.Role, bool) {
	for m, p := range roles {
		if p == r {
			return m, true
		}
	}
	return "", false
}

func toAPIToken(t model.APIToken) *pb.APIToken {
	return &pb.APIToken{
		Id: t.ID, Name: t.Name, Role: toRole(t.Role), CreateTime: ts(t.CreatedAt), ExpireTime: ts(t.ExpiresAt),
		RevokeTime: ts(t.RevokedAt), CreatedBy: t.CreatedBy,
	}
}

func (h *authServer) RevokeCertificate(ctx context.Context, req *pb.RevokeCertificateRequest) (*pb.RevokeCertificateResponse, error) {
	rc := model.RevokedCertificate{Serial: req.GetSerial(), Name: req.GetName(), Issuer: req.GetIssuer()}
	if req.GetExpireTime() != nil {
		rc.NotAfter = req.GetExpireTime().AsTime()
	}
	rc, err := h.svc.RevokeCertificate(ctx, rc)
	if err != nil {
		return nil, err
	}
	return &pb.RevokeCertificateResponse{RevokedCertificate: toRevokedCertificate(rc)}, nil
}

func (h *authServer) ListRevokedCertificates(ctx context.Context, _ *pb.ListRevokedCertificatesRequest) (*pb.ListRevokedCertificatesResponse, error) {
	list, err := h.svc.ListRevokedCertificates(ctx)
	if err != nil {
		return nil, err
	}
	out := &pb.ListRevokedCertificatesResponse{}
	for _, rc := range list {
		out.RevokedCertificates = append(out.RevokedCertificates, toRevokedCertificate(rc))
	}
	return out, nil
}

func toRevokedCertificate(rc model.RevokedCertificate) *pb.RevokedCertificate {
	return &pb.RevokedCertificate{Serial: rc.Serial, Name: rc.Name, Issuer: rc.Issuer, ExpireTime: ts(rc.NotAfter),
		RevokedBy: rc.RevokedBy, RevokeTime: ts(rc.RevokedAt)}
}
