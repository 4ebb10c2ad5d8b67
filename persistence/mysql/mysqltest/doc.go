// Package mysqltest gives a test a database of its own on the MariaDB/MySQL
// server of the machine (127.0.0.1:3306, user root, empty password, or
// $ROOMCELL_TEST_MYSQL_DSN), created empty and dropped when the test ends.
// It creates the database only: each store migrates its own schema into it
// (the returned config has AutoMigrate set), so the room, wallet and notice
// stores of one test may share it. It must not import a store.
package mysqltest
