package configs

// The worker sections (outbox_worker, presence, the notice workers,
// retention, wallet.gift_reconciler) have their defaults in one place,
// their setDefaults method, which Load applies once. A worker takes its
// section as given and checks it with the section's Validate: a zero where
// zero cannot work (an interval, a batch size, a timeout) is an error
// naming the key, never a silent default. Code that builds a section by
// hand (tests, tools) takes the loader's defaults from WithDefaults.

// defaulter is a section whose defaults Load applies.
type defaulter[T any] interface {
	*T
	setDefaults()
}

// WithDefaults returns c with every unset field set to the default Load
// applies to its section (OutboxWorkerConfig, PresenceConfig,
// NoticeConfig, NoticeWorkerConfig, RetentionConfig,
// GiftReconcilerConfig, …): the one source of defaults for code that
// builds a section by hand. Set fields are kept.
func WithDefaults[T any, P defaulter[T]](c T) T {
	P(&c).setDefaults()
	return c
}

// mustBePositive refuses a zero or negative value with its key: in a
// section built in code it is an unset field, which must not run as a
// zero interval or an empty batch.
func mustBePositive[T ~int | ~int64](key string, v T) error {
	if v > 0 {
		return nil
	}
	return errorf(key, "%v is not positive (a section built in code takes its defaults from WithDefaults)", v)
}

// firstError is the first non-nil of errs.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
