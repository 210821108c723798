package mask_test

import (
	"fmt"
	"os"

	"github.com/cikit/cikit/secrets/mask"
)

// A job's output goes through a Writer of the job's Masker: its
// secrets and their encodings are masked, also when a secret is written
// in two pieces.
func Example() {
	m := mask.New()
	if err := m.Add("hunter2-password"); err != nil {
		fmt.Println(err)
	}
	fmt.Println(m.Add("abc"))

	w := m.Writer(os.Stdout)
	fmt.Fprintln(w, "login with hunter2-password")
	fmt.Fprint(w, "base64: aHVudGVyMi1wYXNzd29yZA==\nsplit: hunter2-")
	fmt.Fprint(w, "password\n")
	if err := w.Flush(); err != nil {
		fmt.Println(err)
	}
	fmt.Println(m.String("an annotation about 68756e746572322d70617373776f7264"))
	// Output:
	// secrets: value too short to be masked: a value of 3 bytes (without surrounding white space) would mask ordinary text; a masked value needs at least 4
	// login with ***
	// base64: ***A==
	// split: ***
	// an annotation about ***
}
