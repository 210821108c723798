package s3test_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cikit/cikit/artifacts"
	"github.com/cikit/cikit/internal/s3test"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestServer(t *testing.T) {
	t.Parallel()
	srv := s3test.New(t, "one", "two")
	store, err := artifacts.NewS3Store(t.Context(), srv.Config("two"))
	require.NoError(t, err)
	require.NoError(t, store.Put(t.Context(), "k", strings.NewReader("v"), 1))

	out, err := srv.Client().ListBuckets(t.Context(), &s3.ListBucketsInput{})
	require.NoError(t, err)
	var names []string
	for _, b := range out.Buckets {
		names = append(names, aws.ToString(b.Name))
	}
	require.ElementsMatch(t, []string{"one", "two"}, names)
	obj, err := srv.Client().HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String("two"), Key: aws.String("k")})
	require.NoError(t, err)
	require.Equal(t, int64(1), aws.ToInt64(obj.ContentLength), "the store's object, seen through the plain client")
}

func TestServersShareNothing(t *testing.T) {
	t.Parallel()
	a, b := s3test.New(t, "blobs"), s3test.New(t, "blobs")
	require.NotEqual(t, a.URL, b.URL)
	sa, err := artifacts.NewS3Store(t.Context(), a.Config("blobs"))
	require.NoError(t, err)
	sb, err := artifacts.NewS3Store(t.Context(), b.Config("blobs"))
	require.NoError(t, err)
	require.NoError(t, sa.Put(t.Context(), "k", strings.NewReader("v"), 1))
	_, err = sb.Stat(t.Context(), "k")
	require.Error(t, err, "another server's bucket is another bucket")
}
