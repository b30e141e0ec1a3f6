// The server-option table (cli/server_options.hpp): every row is a flag, a config key and help,
// and each one sets its member of transport::ServerOptions / ServerLimits and nothing else,
// from the command line and from a config file alike.
#include "server_options.hpp"

#include <chrono>
#include <functional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "cli_test_util.hpp"

namespace {

using gpustream::cli::apply_config_section;
using gpustream::cli::make_server_options;
using gpustream::cli::server_config_keys;
using gpustream::cli::server_option_table;
using gpustream::cli::ServerFlags;
using gpustream::cli::ServerOptionRow;
using gpustream::transport::ServerLimits;
using gpustream::transport::ServerOptions;
using std::chrono::milliseconds;

/// Every member a row can set, as text, for comparing two ServerOptions.
std::string describe(const ServerFlags& f, const ServerOptions& o) {
  const auto& l = o.limits;
  std::string s = f.listen + "|" + f.tcp + "|" + f.token_file + "|" + f.tls_cert + "|" + f.tls_key +
                  "|" + f.tls_client_ca + "|" + f.metrics_compat + "|" +
                  (o.metrics_compat == gpustream::transport::MetricsCompat::dcgm ? "dcgm" : "") +
                  "|";
  for (const auto& x : o.allowed_origins) s += x + ",";
  s += "|";
  for (const auto& x : o.allowed_hosts) s += x + ",";
  for (const auto n :
       {l.max_connections, l.max_http_connections, l.max_connections_per_address,
        l.max_message_bytes, l.send_queue_messages, l.send_queue_bytes, l.retained_bytes,
        l.http_response_bytes, l.max_subscribes_per_connection, l.max_client_messages,
        o.encoded_cache, o.encoded_cache_bytes, o.metrics_processes})
    s += "|" + std::to_string(n);
  for (const auto d : {l.handshake_timeout, l.idle_timeout, l.tcp_idle_timeout, l.write_timeout,
                       l.slow_client_timeout, l.shutdown_timeout, l.stream_timeout})
    s += "|" + std::to_string(d.count());
  return s;
}

/// A value inside every row's range, by the kind of member it sets.
std::string sample_value(const ServerOptionRow& row, const std::string& token_file) {
  return std::visit(
      [&](auto member) -> std::string {
        using Member = decltype(member);
        if constexpr (std::is_same_v<Member, std::string ServerFlags::*>)
          return row.flag == "--token"            ? token_file
                 : row.flag == "--metrics-compat" ? "dcgm"
                                                  : "127.0.0.1:0";
        else if constexpr (std::is_same_v<Member, milliseconds ServerLimits::*>)
          return "0.25";
        else if constexpr (std::is_same_v<Member, std::size_t ServerLimits::*> ||
                           std::is_same_v<Member, std::size_t ServerOptions::*>)
          return row.flag.ends_with("-bytes") ? "1048576" : "300";  // byte bounds start higher
        else
          return "http://gpu-box.lan:9400";
      },
      row.target);
}

/// Sets the row's member of (flags, options) as `value` says it should.
void set_expected(const ServerOptionRow& row, const std::string& value, ServerFlags& flags) {
  std::visit(
      [&](auto member) {
        using Member = decltype(member);
        if constexpr (std::is_same_v<Member, std::string ServerFlags::*>)
          flags.*member = value;
        else if constexpr (std::is_same_v<Member, milliseconds ServerLimits::*>)
          flags.options.limits.*member = milliseconds(250);
        else if constexpr (std::is_same_v<Member, std::size_t ServerLimits::*>)
          flags.options.limits.*member = std::stoull(value);
        else if constexpr (std::is_same_v<Member, std::size_t ServerOptions::*>)
          flags.options.*member = std::stoull(value);
        else
          flags.options.*member = {value};
      },
      row.target);
}

TEST(ServerOptionTable, EveryRowHasAFlagAConfigKeyAndHelp) {
  std::set<std::string_view> flags;
  std::set<std::string_view> keys;
  for (const auto& row : server_option_table()) {
    EXPECT_EQ(row.flag.substr(0, 2), "--") << row.flag;
    EXPECT_FALSE(row.key.empty()) << row.flag;
    EXPECT_FALSE(row.help.empty()) << row.flag;
    EXPECT_TRUE(flags.insert(row.flag).second) << "twice: " << row.flag;
    EXPECT_TRUE(keys.insert(row.key).second) << "twice: " << row.key;
  }
  EXPECT_EQ(server_option_table().size(), 26u);
}

TEST(ServerOptionTable, ConfigKeysAreTheRowsKeys) {
  const auto& keys = server_config_keys();
  ASSERT_EQ(keys.size(), server_option_table().size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(keys[i].key, server_option_table()[i].key);
    EXPECT_EQ(keys[i].flag, server_option_table()[i].flag);
  }
}

TEST(ServerOptionTable, TheHelpStatesTheDefaultTheRowSets) {
  const ServerFlags defaults;
  for (const auto& row : server_option_table()) {
    const std::string help(row.help);
    const std::string said = std::visit(
        [&](auto member) -> std::string {
          using Member = decltype(member);
          if constexpr (std::is_same_v<Member, std::string ServerFlags::*>)
            return (defaults.*member).empty() ? "" : "default " + defaults.*member;
          else if constexpr (std::is_same_v<Member, milliseconds ServerLimits::*>)
            return "default " + std::to_string((defaults.options.limits.*member).count() / 1000);
          else if constexpr (std::is_same_v<Member, std::size_t ServerLimits::*>)
            return "default " + std::to_string(defaults.options.limits.*member);
          else if constexpr (std::is_same_v<Member, std::size_t ServerOptions::*>)
            return defaults.options.*member == 0
                       ? "0: none (default)"
                       : "default " + std::to_string(defaults.options.*member);
          else
            return (defaults.options.*member).empty() ? "" : "?";
        },
        row.target);
    EXPECT_NE(help.find(said), std::string::npos) << row.flag << ": '" << said << "' in " << help;
  }
}

/// The flags' values after `give` has handed a value to a fresh app's server flags.
ServerFlags parsed_with(const std::function<void(CLI::App&)>& give) {
  ServerFlags parsed;
  CLI::App app;
  gpustream::cli::add_server_options(app, parsed);
  give(app);
  return parsed;
}

// Each flag sets its own member and no other: the ServerOptions made from the parsed flags
// equal the defaults with that one member changed. The config file's key sets the same.
TEST(ServerOptionTable, EachFlagAndConfigKeySetsItsMemberOnly) {
  gpustream::cli::test::TempDir dir;
  dir.write("token", "s3cret\n");
  for (const auto& row : server_option_table()) {
    const auto value = sample_value(row, dir.file("token"));
    ServerFlags expected;
    set_expected(row, value, expected);
    const auto by_flag = parsed_with([&](CLI::App& app) {
      app.parse(std::vector<std::string>{value, std::string(row.flag)});  // CLI11: reversed
    });
    EXPECT_EQ(describe(by_flag, by_flag.options), describe(expected, expected.options)) << row.flag;
    const auto by_key = parsed_with([&](CLI::App& app) {
      app.parse(std::vector<std::string>{});
      gpustream::Config config;
      config.probe_settings.set("serve", row.key, value);
      apply_config_section(config, app, "serve", {&server_config_keys()});
    });
    EXPECT_EQ(describe(by_key, by_key.options), describe(expected, expected.options)) << row.key;
    if (row.flag == "--listen" || row.flag == "--tcp" || row.flag == "--token" ||
        row.flag.substr(0, 6) == "--tls-" || row.flag == "--metrics-compat")
      continue;  // parsed or paired by make_server_options (TLS: TlsFilesGoTogether below;
                 // --metrics-compat: MetricsCompatIsNativeOrDcgm)
    const auto so = make_server_options(by_flag);
    EXPECT_EQ(describe(ServerFlags{}, so), describe(ServerFlags{}, expected.options)) << row.flag;
  }
}

TEST(ServerOptionTable, TlsFilesGoTogether) {
  ServerFlags f;
  f.tls_cert = "/etc/gpustream/cert.pem";
  EXPECT_THROW(make_server_options(f), gpustream::ConfigError);  // no key
  f.tls_key = "/etc/gpustream/key.pem";
  auto so = make_server_options(f);
  ASSERT_TRUE(so.tls);
  EXPECT_EQ(so.tls->cert_file, "/etc/gpustream/cert.pem");
  EXPECT_EQ(so.tls->key_file, "/etc/gpustream/key.pem");
  EXPECT_EQ(so.tls->client_ca_file, "");
  f.tls_client_ca = "/etc/gpustream/clients.pem";
  EXPECT_EQ(make_server_options(f).tls->client_ca_file, "/etc/gpustream/clients.pem");
  ServerFlags ca_only;
  ca_only.tls_client_ca = "/etc/gpustream/clients.pem";
  EXPECT_THROW(make_server_options(ca_only), gpustream::ConfigError);
  EXPECT_FALSE(make_server_options(ServerFlags{}).tls);
}

TEST(ServerOptionTable, MetricsCompatIsNativeOrDcgm) {
  using gpustream::transport::MetricsCompat;
  EXPECT_EQ(make_server_options(ServerFlags{}).metrics_compat, MetricsCompat::native);
  const auto dcgm = parsed_with([](CLI::App& app) {
    app.parse(std::vector<std::string>{"dcgm", "--metrics-compat"});
  });
  EXPECT_EQ(make_server_options(dcgm).metrics_compat, MetricsCompat::dcgm);
  const auto native = parsed_with([](CLI::App& app) {
    app.parse(std::vector<std::string>{"native", "--metrics-compat"});
  });
  EXPECT_EQ(make_server_options(native).metrics_compat, MetricsCompat::native);
  // An unknown value: a usage error naming the choices, by flag and by key alike.
  ServerFlags parsed;
  CLI::App app;
  gpustream::cli::add_server_options(app, parsed);
  try {
    app.parse(std::vector<std::string>{"dcgmx", "--metrics-compat"});
    ADD_FAILURE() << "--metrics-compat dcgmx accepted";
  } catch (const CLI::ValidationError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("dcgmx"), std::string::npos) << what;
    EXPECT_NE(what.find("native"), std::string::npos) << what;
    EXPECT_NE(what.find("dcgm"), std::string::npos) << what;
  }
  CLI::App app2;
  gpustream::cli::add_server_options(app2, parsed);
  app2.parse(std::vector<std::string>{});
  gpustream::Config config;
  config.probe_settings.set("fleet", "metrics_compat", std::string("DCGM"));
  try {
    apply_config_section(config, app2, "fleet", {&server_config_keys()});
    ADD_FAILURE() << "fleet.metrics_compat DCGM accepted";
  } catch (const gpustream::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("fleet.metrics_compat"), std::string::npos) << e.what();
  }
  ServerFlags bad;  // set without the flag's check: make_server_options says so too
  bad.metrics_compat = "prometheus";
  EXPECT_THROW(make_server_options(bad), gpustream::ConfigError);
}

TEST(ServerOptionTable, AValueOutOfRangeIsRefusedByFlagAndKeyAlike) {
  ServerFlags parsed;
  CLI::App app;
  gpustream::cli::add_server_options(app, parsed);
  EXPECT_THROW(app.parse(std::vector<std::string>{"0", "--max-connections"}), CLI::ValidationError);
  CLI::App app2;
  gpustream::cli::add_server_options(app2, parsed);
  app2.parse(std::vector<std::string>{});
  gpustream::Config config;
  config.probe_settings.set("serve", "idle_timeout_seconds", 0.01);
  EXPECT_THROW(apply_config_section(config, app2, "serve", {&server_config_keys()}),
               gpustream::ConfigError);
}

TEST(ServerOptionTable, SecondsBecomeWholeMilliseconds) {
  EXPECT_EQ(gpustream::cli::millis_of_seconds(0.05), milliseconds(50));
  EXPECT_EQ(gpustream::cli::millis_of_seconds(1.0009), milliseconds(1000));
  EXPECT_EQ(gpustream::cli::millis_of_seconds(300), milliseconds(300000));
}

}  // namespace
