package bearer_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc/metadata"

	"github.com/toolscope/toolscope/internal/bearer"
	"github.com/toolscope/toolscope/internal/errdefs"
)

func TestCheckRequiresTheSchemeAndTheExactSecret(t *testing.T) {
	t.Parallel()
	const secret = "per-launch-secret"
	for header, ok := range map[string]bool{
		"Bearer " + secret:       true,
		"bearer " + secret:       true, // the scheme is case-insensitive
		"BEARER " + secret:       true,
		secret:                   false, // no scheme
		"Bearer " + secret + "x": false,
		"Bearer " + secret[1:]:   false,
		"Basic " + secret:        false,
		"Bearer ":                false,
		"":                       false,
	} {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", header))
		given, err := bearer.Check(ctx, secret)
		assert.True(t, given, "%q", header)
		if ok {
			assert.NoError(t, err, "%q", header)
		} else {
			assert.ErrorIs(t, err, errdefs.ErrUnauthenticated, "%q", header)
			assert.NotContains(t, err.Error(), secret, "the error never echoes the secret")
		}
	}
	given, err := bearer.Check(context.Background(), secret)
	assert.False(t, given)
	assert.ErrorIs(t, err, errdefs.ErrUnauthenticated)
	_, err = bearer.Check(metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer ")), "")
	assert.Error(t, err, "an empty secret never matches")
}
