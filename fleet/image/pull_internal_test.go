package image

import "testing"

func TestInternalHost(t *testing.T) {
	t.Parallel()
	for host, want := range map[string]bool{
		"127.0.0.1":                  true,
		"10.1.2.3":                   true,
		"192.168.0.1":                true,
		"169.254.169.254":            true,
		"0.0.0.0":                    true,
		"::1":                        true,
		"fe80::1%eth0":               true,
		"::ffff:10.0.0.1":            true,
		"127.1":                      true,
		"0x7f000001":                 true,
		"2130706433":                 true,
		"8.8.8.8":                    false,
		"2001:4860:4860::8888":       false,
		"storage.googleapis.com":     false,
		"s3.us-east-1.amazonaws.com": false,
		"localhost":                  false,
	} {
		if got := internalHost(host); got != want {
			t.Errorf("internalHost(%q) = %v, want %v", host, got, want)
		}
	}
}
