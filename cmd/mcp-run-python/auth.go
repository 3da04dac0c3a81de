package main

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/auth"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/config"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/transport"
)

// newAuth builds the authentication of cfg's HTTP mode, whose endpoint is at
// path: nil when callers need none. Static tokens are read again whenever
// the process gets SIGHUP (see onReload), until ctx ends.
func newAuth(ctx context.Context, cfg config.Config, path string, log *zap.Logger) (*transport.Auth, error) {
	a := cfg.Auth
	switch {
	case a.OAuthIssuer != "":
		resource := a.PublicURL
		if resource == "" {
			scheme := "http"
			if cfg.TLSCert != "" {
				scheme = "https"
			}
			resource = scheme + "://" + net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)) + path
		}
		o, err := auth.NewOAuth(ctx, auth.OAuthConfig{Issuer: a.OAuthIssuer, Audience: a.OAuthAudience, Scopes: a.OAuthScopes, Log: log})
		if err != nil {
			return nil, fmt.Errorf("--oauth-issuer: %w", err)
		}
		return &transport.Auth{Authenticator: o, Resource: resource, AuthorizationServers: o.AuthorizationServers(),
			Scopes: a.OAuthScopes, Metrics: a.Metrics}, nil
	case a.TokenFile != "":
		tokens, err := auth.NewStaticTokens(a.TokenFile, log)
		if err != nil {
			return nil, fmt.Errorf("--auth-token-file: %w", err)
		}
		onReload(ctx, func() {
			if err := tokens.Reload(); err != nil {
				log.Error("the token file was not read again; the tokens stay as they were", zap.Error(err))
				return
			}
			log.Info("the token file was read again", zap.String("file", a.TokenFile))
		})
		return &transport.Auth{Authenticator: tokens, Metrics: a.Metrics}, nil
	}
	return nil, nil
}

// isLoopback reports whether host, an address to listen on, only takes
// connections from this machine.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
