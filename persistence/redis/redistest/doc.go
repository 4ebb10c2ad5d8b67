// Package redistest gives a test its own slice of Redis: Config, a key
// prefix roomcell_test_<random>: on the machine's shared server
// (127.0.0.1:6379, or $ROOMCELL_TEST_REDIS_ADDR) whose keys are deleted when
// the test ends, and StartServer, a private redis-server on a free
// loopback port that the test may kill and restart (never the shared one).
// It must not import a directory or store package.
package redistest
