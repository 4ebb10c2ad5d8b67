package mysql

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	driverMySQL "github.com/go-sql-driver/mysql"

	"github.com/hyapp/roomcell/persistence"
)

// raiseFences upserts room_fences rows and refuses a lower epoch in the
// same statement: the update sets the NOT NULL epoch to NULL, which strict
// mode (sessionInit) turns into error 1048 and a rollback of the
// statement. One statement serves a whole group-commit batch, and a
// refused row fails the statement like a taken seq does, so the batch
// falls back to one savepoint per append and only the stale one fails.
const raiseFences = "INSERT INTO room_fences (app_code, room_id, epoch) VALUES "

const fenceHigherOnly = " ON DUPLICATE KEY UPDATE epoch = IF(VALUES(epoch) >= epoch, VALUES(epoch), NULL)"

// fenceStatement is the fence write of ps (none when no append carries an
// epoch). Rows of one room come highest epoch first, so a stale append
// riding in the same batch as the room's new owner is refused too.
func fenceStatement(ps []*pendingAppend, keys []rowKey) []statement {
	rows := make([]int, 0, len(ps)) // of ps
	for i, p := range ps {
		if p.a.Epoch > 0 {
			rows = append(rows, i)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	slices.SortFunc(rows, func(x, y int) int {
		a, b := ps[x].a, ps[y].a
		return cmp.Or(strings.Compare(a.Command.AppCode, b.Command.AppCode), strings.Compare(a.Command.RoomID, b.Command.RoomID),
			cmp.Compare(b.Epoch, a.Epoch))
	})
	b := rowsBuilder{head: raiseFences, tail: fenceHigherOnly, rows: len(rows), rowArgs: 2, rowText: len("(?,?,)") + maxIntText}
	for _, i := range rows {
		c := ps[i].a.Command
		b.row(len(c.AppCode)+len(c.RoomID)+16).param(keys[i].app, keys[i].room).ints(ps[i].a.Epoch).end()
	}
	b.flush()
	return b.out
}

// isFenced reports the fence statement's refusal.
func isFenced(err error) bool {
	var me *driverMySQL.MySQLError
	return errors.As(err, &me) && me.Number == erBadNull && strings.Contains(me.Message, "'epoch'")
}

// wrapAppend classifies the error of one append: a refused epoch is a
// conflict (the room has a newer owner), anything else as usual.
func (s *Store) wrapAppend(p *pendingAppend, err error) error {
	c := p.a.Command
	if isFenced(err) {
		return fmt.Errorf("mysql: append %s seq %d: epoch %d is below the room's fence (the room has a newer owner): %w",
			c.Key(), c.Seq, p.a.Epoch, persistence.ErrConflict)
	}
	return s.wrap("append "+c.Key().String(), err)
}

// FenceRoom implements persistence.RoomStore.
func (s *Store) FenceRoom(ctx context.Context, key persistence.RoomKey, epoch int64) error {
	if err := ready(ctx); err != nil {
		return err
	}
	if epoch == 0 {
		return nil
	}
	if epoch < 0 {
		return fmt.Errorf("%w: negative epoch %d", errInvalid, epoch)
	}
	if err := errors.Join(
		checkLen("app_code", key.AppCode, maxAppCode, true),
		checkLen("room_id", key.RoomID, maxRoomID, true),
	); err != nil {
		return err
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	_, err := s.db.ExecContext(ctx, raiseFences+"(?,?,?)"+fenceHigherOnly, key.AppCode, key.RoomID, epoch)
	if isFenced(err) {
		return fmt.Errorf("mysql: fence %s: epoch %d is below the room's fence: %w", key, epoch, persistence.ErrConflict)
	}
	if err != nil {
		return s.wrap("fence "+key.String(), err)
	}
	return nil
}
