// ProbeSettings: the standard-library value that holds the sections of settings (a probe's, the
// CLI's "serve"), and its JSON form in gpustream/config_json.hpp (a config file's sections).
#include "gpustream/probe_settings.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "gpustream/config.hpp"
#include "gpustream/config_json.hpp"

namespace gpustream {
namespace {

TEST(ProbeSettings, SetGetContainsEraseAndSections) {
  ProbeSettings s;
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(s.get("nvidia", "library"), nullptr);
  EXPECT_EQ(s.section("nvidia"), nullptr);
  s.set("nvidia", "library", "/opt/libnvidia-ml.so.1");
  s.set("nvidia", "nvidia_smi_timeout_ms", 1500);
  s.set("amd", "source", std::string("sysfs"));
  s["intel"];  // present and empty, as {"intel": {}} in a file
  EXPECT_EQ(s.sections(), (std::vector<std::string>{"amd", "intel", "nvidia"}));
  EXPECT_TRUE(s.contains("intel"));
  EXPECT_FALSE(s.contains("intel", "level_zero_library"));
  ASSERT_NE(s.get("nvidia", "library"), nullptr);
  EXPECT_EQ(*s.get("nvidia", "library")->if_string(), "/opt/libnvidia-ml.so.1");
  ASSERT_NE(s.get("nvidia", "nvidia_smi_timeout_ms")->if_int(), nullptr);
  EXPECT_EQ(*s.get("nvidia", "nvidia_smi_timeout_ms")->if_int(), 1500);
  EXPECT_EQ(s.get("nvidia", "library")->if_int(), nullptr);  // no conversion between types

  s.set("nvidia", "library", "/other");  // replaces
  EXPECT_EQ(*s.get("nvidia", "library")->if_string(), "/other");
  EXPECT_TRUE(s.erase("nvidia", "library"));
  EXPECT_FALSE(s.erase("nvidia", "library"));
  EXPECT_TRUE(s.contains("nvidia"));
  EXPECT_TRUE(s.erase("nvidia"));
  EXPECT_FALSE(s.erase("nvidia"));
  EXPECT_EQ(s.size(), 2u);
}

TEST(ProbeSettings, ValuesKeepTheirType) {
  EXPECT_EQ(SettingValue(true).type_name(), "true/false");
  EXPECT_EQ(SettingValue(7).type_name(), "an integer");
  EXPECT_EQ(SettingValue(std::int64_t{-3}).type_name(), "an integer");
  EXPECT_EQ(SettingValue(0.5).type_name(), "a number");
  EXPECT_EQ(SettingValue("x").type_name(), "a string");  // a literal is a string, not a bool
  EXPECT_EQ(SettingValue(SettingValue::List{"a", std::int64_t{1}}).type_name(), "a list");
  EXPECT_TRUE(SettingValue(2.0).is_number());
  EXPECT_FALSE(SettingValue("2").is_number());
  EXPECT_NE(SettingValue(1), SettingValue(1.0));
}

TEST(ProbeSettings, JsonSectionsRoundTrip) {
  const auto doc = boost::json::parse(
      R"({"serve": {"listen": "127.0.0.1:0", "allow_origins": ["a", "b"], "max_connections": 8,)"
      R"( "idle_timeout_seconds": 2.5, "flag": true}, "amd": {}})");
  const Config c = config_from_json(doc, {}, {"serve", "amd"});
  EXPECT_TRUE(c.probe_settings.contains("amd"));
  const auto* origins = c.probe_settings.get("serve", "allow_origins");
  ASSERT_NE(origins, nullptr);
  ASSERT_NE(origins->if_list(), nullptr);
  EXPECT_EQ(origins->if_list()->size(), 2u);
  EXPECT_EQ(*c.probe_settings.get("serve", "max_connections")->if_int(), 8);
  EXPECT_EQ(*c.probe_settings.get("serve", "idle_timeout_seconds")->if_double(), 2.5);
  EXPECT_EQ(*c.probe_settings.get("serve", "flag")->if_bool(), true);
  EXPECT_EQ(boost::json::value(to_json(c.probe_settings)),
            boost::json::parse(R"({"amd": {}, "serve": {"listen": "127.0.0.1:0",)"
                               R"( "allow_origins": ["a", "b"], "max_connections": 8,)"
                               R"( "idle_timeout_seconds": 2.5, "flag": true}})"));
}

TEST(ProbeSettings, AValueThatIsNoSettingIsAnErrorNamingItsKey) {
  for (const char* text :
       {R"({"nvidia": {"library": {"path": "x"}}})", R"({"nvidia": {"library": null}})",
        R"({"nvidia": {"library": [["x"]]}})"}) {
    try {
      config_from_json(boost::json::parse(text), {}, {"nvidia"});
      FAIL() << "expected ConfigError for " << text;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("'nvidia.library': expected"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace gpustream
