package dag

// SetFault makes s call fault between the steps of its writes (see
// PostgresStore.step); an error stops the write there, as a crash would.
func SetFault(s *PostgresStore, fault func(step string) error) { s.fault = fault }
