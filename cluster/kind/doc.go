// Package kind builds grain kinds that work under any Proto.Actor
// identity lookup and cost less under roomcell's own placement (package
// cluster). It owns only the record of each kind's props without the
// library's middleware; it must not touch actors, stores or the member.
package kind
