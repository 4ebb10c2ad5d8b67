// Package tencentim is roomcell's client for Tencent Cloud IM's server
// REST API: the admin UserSig v2 (issued from sdk_app_id, secret key and
// admin identifier, cached and renewed at half-life), one JSON POST per API
// (send_group_msg and sendmsg with a TIMCustomElem, account_import,
// create_group, delete_group_member, ban_group_member, forbid_send_msg, destroy_group), Tencent's response
// envelope mapped onto error classes (ErrRetryable, ErrPermanent,
// ErrRateLimited, plus the guide's finer Class), and the rate limits
// Tencent enforces (per API and per group), which it honours by waiting,
// bounded by the caller's context, never by failing. It owns no event
// semantics: which event goes where is roomim's business. Errors and logs
// must never carry the secret key, a UserSig or a full response body.
package tencentim
