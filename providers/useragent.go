package providers

import "github.com/hookwarden/hookwarden/internal/version"

// ProjectURL is where Hookwarden lives; it goes into the User-Agent so that an API's operators
// can find who is calling.
const ProjectURL = "https://github.com/hookwarden/hookwarden"

// UserAgent is the User-Agent every provider client sends: "hookwarden/<version>
// (+https://github.com/hookwarden/hookwarden)", the version as --version reports it.
func UserAgent() string { return userAgent(version.Get().Version) }

func userAgent(v string) string { return "hookwarden/" + v + " (+" + ProjectURL + ")" }

// QuietLogger drops an HTTP library's log lines (resty's Errorf, Warnf, Debugf): they may carry
// request details, and every client reports failures through its classified errors instead.
type QuietLogger struct{}

func (QuietLogger) Errorf(string, ...any) {}
func (QuietLogger) Warnf(string, ...any)  {}
func (QuietLogger) Debugf(string, ...any) {}
