package pgtest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWithSearchPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, want string
	}{
		{
			name: "default",
			in:   DefaultURL,
			want: "postgres://postgres:postgres@127.0.0.1:5432/postgres?options=-c%20search_path%3Dt_ab&sslmode=disable",
		},
		{
			name: "options kept",
			in:   "postgresql://u@h/db?options=-c%20statement_timeout%3D5s",
			want: "postgresql://u@h/db?options=-c%20statement_timeout%3D5s%20-c%20search_path%3Dt_ab",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := withSearchPath(tc.in, "t_ab")
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}

	t.Run("not a URL", func(t *testing.T) {
		t.Parallel()
		for _, in := range []string{"host=h user=u password=secret", "mysql://u:secret@h/db"} {
			_, err := withSearchPath(in, "t_ab")
			require.ErrorContains(t, err, "not a postgres:// URL")
			require.NotContains(t, err.Error(), "secret")
		}
	})
}
