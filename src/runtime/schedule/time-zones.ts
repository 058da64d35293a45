/**
 * Time zone names as Dapr's Scheduler reads them in a `TZ=`/`CRON_TZ=` prefix: Go's `time.LoadLocation`, which opens
 * the tzdata file of that exact name, so names are case-sensitive (`Europe/Paris`, not `europe/paris`). The gateway
 * checks names with the JavaScript runtime's ICU, which ignores case and reports a link (`US/Pacific`) under its
 * target's name (`America/Los_Angeles`); it also knows names tzdata has not (`SystemV/AST4`). A name is accepted when
 * it is written exactly as one of ICU's canonical names (all tzdata names) or one of tzdata's other names below, so no
 * spelling that Go would not find is taken.
 * A zone the Scheduler's tzdata lacks is still refused by the Scheduler; the Dapr adapter reports that as
 * INVALID_ARGUMENT naming `schedule` (src/runtime/dapr/jobs.ts).
 */

/**
 * The tzdata names that are not among ICU's canonical names (`Intl.supportedValuesOf("timeZone")`): its links (the
 * `backward` file and the legacy top-level names), which ICU resolves to another name, plus `UTC` and `Etc/GMT+n`,
 * which ICU knows but does not list (tzdata 2025b, ICU 78.2, Node 20). Case-exact.
 */
const LINKS = new Set(
  (
  "Africa/Asmara Africa/Timbuktu America/Argentina/Buenos_Aires America/Argentina/Catamarca " +
  "America/Argentina/ComodRivadavia America/Argentina/Cordoba America/Argentina/Jujuy America/Argentina/Mendoza " +
  "America/Atikokan America/Atka America/Ensenada America/Fort_Wayne America/Indiana/Indianapolis " +
  "America/Kentucky/Louisville America/Knox_IN America/Montreal America/Nipigon America/Nuuk America/Pangnirtung " +
  "America/Porto_Acre America/Rainy_River America/Rosario America/Santa_Isabel America/Shiprock America/Thunder_Bay " +
  "America/Virgin America/Yellowknife Antarctica/South_Pole Asia/Ashkhabad Asia/Choibalsan Asia/Chongqing " +
  "Asia/Chungking Asia/Dacca Asia/Harbin Asia/Ho_Chi_Minh Asia/Istanbul Asia/Kashgar Asia/Kathmandu Asia/Kolkata " +
  "Asia/Macao Asia/Tel_Aviv Asia/Thimbu Asia/Ujung_Pandang Asia/Ulan_Bator Asia/Yangon Atlantic/Faroe " +
  "Atlantic/Jan_Mayen Australia/ACT Australia/Canberra Australia/Currie Australia/LHI Australia/NSW Australia/North " +
  "Australia/Queensland Australia/South Australia/Tasmania Australia/Victoria Australia/West Australia/Yancowinna " +
  "Brazil/Acre Brazil/DeNoronha Brazil/East Brazil/West CET CST6CDT Canada/Atlantic Canada/Central Canada/Eastern " +
  "Canada/Mountain Canada/Newfoundland Canada/Pacific Canada/Saskatchewan Canada/Yukon Chile/Continental " +
  "Chile/EasterIsland Cuba EET EST EST5EDT Egypt Eire Etc/GMT Etc/GMT+0 Etc/GMT+1 Etc/GMT+10 Etc/GMT+11 Etc/GMT+12 " +
  "Etc/GMT+2 Etc/GMT+3 Etc/GMT+4 Etc/GMT+5 Etc/GMT+6 Etc/GMT+7 Etc/GMT+8 Etc/GMT+9 Etc/GMT-0 Etc/GMT-1 Etc/GMT-10 " +
  "Etc/GMT-11 Etc/GMT-12 Etc/GMT-13 Etc/GMT-14 Etc/GMT-2 Etc/GMT-3 Etc/GMT-4 Etc/GMT-5 Etc/GMT-6 Etc/GMT-7 " +
  "Etc/GMT-8 Etc/GMT-9 Etc/GMT0 Etc/Greenwich Etc/UCT Etc/UTC Etc/Universal Etc/Zulu Europe/Belfast Europe/Kyiv " +
  "Europe/Nicosia Europe/Tiraspol Europe/Uzhgorod Europe/Zaporozhye GB GB-Eire GMT GMT+0 GMT-0 GMT0 Greenwich HST " +
  "Hongkong Iceland Iran Israel Jamaica Japan Kwajalein Libya MET MST MST7MDT Mexico/BajaNorte Mexico/BajaSur " +
  "Mexico/General NZ NZ-CHAT Navajo PRC PST8PDT Pacific/Chuuk Pacific/Johnston Pacific/Kanton Pacific/Pohnpei " +
  "Pacific/Samoa Pacific/Yap Poland Portugal ROC ROK Singapore Turkey UCT US/Alaska US/Aleutian US/Arizona " +
  "US/Central US/East-Indiana US/Eastern US/Hawaii US/Indiana-Starke US/Michigan US/Mountain US/Pacific US/Samoa " +
  "UTC Universal W-SU WET Zulu "
  )
    .trim()
    .split(" "),
);

let canonicalNames: Set<string> | undefined;
/** ICU's canonical names (built on first use): all are tzdata names, spelled as tzdata spells them. */
const canonical = (): Set<string> => (canonicalNames ??= new Set(Intl.supportedValuesOf("timeZone")));

/** Whether Go's `time.LoadLocation` finds `name` in tzdata as written (among the names ICU knows too). */
const isTzdataName = (name: string): boolean => LINKS.has(name) || canonical().has(name);

/**
 * Whether the Scheduler's Go would find time zone `name`: undefined when it would, else what is wrong; `spelled` is
 * the name as tzdata writes it when only the case is wrong (`europe/paris`), absent when no such zone is known.
 */
export function timeZoneProblem(name: string): { spelled?: string } | undefined {
  let resolved: string;
  try {
    resolved = new Intl.DateTimeFormat("en-US", { timeZone: name }).resolvedOptions().timeZone;
  } catch {
    return {};
  }
  if (isTzdataName(name)) return undefined;
  const lower = name.toLowerCase();
  const spelled = [resolved, ...LINKS].find((n) => n.toLowerCase() === lower && isTzdataName(n));
  return spelled ? { spelled } : {};
}
