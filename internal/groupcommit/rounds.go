package groupcommit

// Rounds splits the indexes todo into rounds in which no two share a key,
// keeping each key's indexes in their order: round k holds the k-th index
// of every key that has one, in todo's order. A store writes a batch
// round by round where one statement cannot write a row twice, so that a
// row's writes land in the order they were asked.
func Rounds[K comparable](todo []int, key func(i int) K) [][]int {
	var rounds [][]int
	nth := make(map[K]int, len(todo))
	for _, i := range todo {
		k := key(i)
		r := nth[k]
		nth[k] = r + 1
		if r == len(rounds) {
			rounds = append(rounds, nil)
		}
		rounds[r] = append(rounds[r], i)
	}
	return rounds
}
