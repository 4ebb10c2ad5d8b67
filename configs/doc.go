// Package configs loads roomcell's YAML configuration: one struct per
// section (one file each), defaults, validation whose errors name the
// offending key, and ${ENV} expansion so secrets stay out of files. The
// shipped YAML files beside it (config.yaml, config.docker.yaml,
// config.tencent.example.yaml) are loaded through the same code in tests.
// It must not import any other roomcell package: everything else reads
// configuration from here.
package configs
