"""What a user's analytics statement may name: pure functions, row-making table functions,
aggregate combinators. Anything else is refused by ``sqlguard``; a new ClickHouse function
stays refused until it is listed here.

Made from chDB 26.9's ``system.functions`` (the categories of pure computation: arithmetic,
comparison, logic, conditionals, maths, rounding, bits, strings, string search, splitting
and replacement, encoding, hashes, random numbers, dates and times, type conversion,
arrays, tuples, maps, nulls, JSON, UUIDs, aggregates) with hand-picked pure functions of
the ``Other`` category; no dictionary, host, file, network, introspection, AI or machine
learning function. Names match ignoring case: no two functions differ only in case where
one is listed and the other is not (``test_sqlnames``).
"""

from __future__ import annotations

__all__ = [
    "AGGREGATES",
    "COMBINATORS",
    "FUNCTIONS",
    "TABLE_FUNCTIONS",
    "allowed_function",
    "allowed_table_function",
]


def _names(text: str) -> frozenset[str]:
    return frozenset(name.lower() for name in text.split())


TABLE_FUNCTIONS = frozenset(
    {"numbers", "numbers_mt", "zeros", "zeros_mt", "values", "generate_series", "generateSeries"}
)
"""Table functions a statement may read from: they make rows and read nothing."""


def allowed_table_function(name: str) -> bool:
    """Whether ``name`` is one of ``TABLE_FUNCTIONS``, ignoring case."""
    return name.lower() in {t.lower() for t in TABLE_FUNCTIONS}


COMBINATORS: tuple[str, ...] = (
    *("If", "Array", "Map", "OrNull", "OrDefault", "Distinct", "State", "Merge", "ForEach"),
    *("Resample", "SimpleState", "ArgMin", "ArgMax", "Tuple"),
)
"""Aggregate function combinators (``avgIf``, ``uniqExactIfOrNull``, ``sumForEach``)."""

_SYNTAX = _names("lambda exists")
"""Functions the parser writes for syntax (``x -> x + 1``, ``EXISTS (SELECT …)``)."""

FUNCTIONS = _names(
    """
    _CAST abs accurateCast accurateCastOrDefault accurateCastOrNull acos acosh addDate addDays
    addHours addInterval addMicroseconds addMilliseconds addMinutes addMonths addNanoseconds
    addQuarters addSeconds addTupleOfIntervals addWeeks addYears age alphaTokens and
    appendTrailingCharIfAbsent array array_remove array_to_string arrayAll arrayAUC arrayAUCPR
    arrayAutocorrelation arrayAvg arrayBottomK arrayCompact arrayConcat arrayCount arrayCumSum
    arrayCumSumNonNegative arrayDifference arrayDistinct arrayDotProduct arrayElement
    arrayElementOrNull arrayEnumerate arrayEnumerateDense arrayEnumerateDenseRanked
    arrayEnumerateUniq arrayEnumerateUniqRanked arrayExcept arrayExists arrayFill arrayFilter
    arrayFirst arrayFirstIndex arrayFirstOrNull arrayFlatten arrayFlattenedLength arrayFold
    arrayIntersect arrayJaccardIndex arrayJoin arrayLast arrayLastIndex arrayLastOrNull
    arrayLevenshteinDistance arrayLevenshteinDistanceWeighted arrayMap arrayMax arrayMin
    arrayNormalizedGini arrayPartialReverseSort arrayPartialShuffle arrayPartialSort
    arrayPopBack arrayPopFront arrayPRAUC arrayProduct arrayPushBack arrayPushFront
    arrayRandomSample arrayReduce arrayReduceInRanges arrayRemove arrayResize arrayReverse
    arrayReverseFill arrayReverseSort arrayReverseSplit arrayROCAUC arrayRotateLeft
    arrayRotateRight arrayShiftLeft arrayShiftRight arrayShingles arrayShuffle arraySimilarity
    arraySlice arraySort arraySplit arrayStringConcat arraySum arraySymmetricDifference
    arrayTopK arrayTranspose arrayUnion arrayUniq arrayWithConstant arrayZip arrayZipUnaligned
    ascii asin asinh assumeNotNull atan atan2 atanh avg2 bar base32Decode base32Encode
    base58Decode base58Encode base64Decode base64Encode base64URLDecode base64URLEncode basename
    bin bitAnd bitCount bitHammingDistance bitmaskToArray bitmaskToList bitNot bitOr
    bitPositionsToArray bitRotateLeft bitRotateRight bitShiftLeft bitShiftRight bitSlice bitTest
    bitTestAll bitTestAny bitXor byteHammingDistance byteSize byteSlice byteSwap CARDINALITY
    caseFoldUTF8 caseWithExpr caseWithExpression caseWithoutExpr caseWithoutExpression CAST cbrt
    ceil ceiling changeDay changeHour changeMinute changeMonth changeSecond changeYear char
    CHAR_LENGTH CHARACTER_LENGTH chdb cityHash64 clamp coalesce compareSubstrings concat
    concat_ws concatAssumeInjective concatWithSeparator concatWithSeparatorAssumeInjective conv
    convertCharset cos cosh countDigits countEqual countMatches countMatchesCaseInsensitive
    countSubstrings countSubstringsCaseInsensitive countSubstringsCaseInsensitiveUTF8 CRC32
    CRC32IEEE CRC64 curdate current_date current_timestamp damerauLevenshteinDistance DATE
    date_bin DATE_DIFF date_diff DATE_FORMAT DATE_TRUNC dateDiff dateName
    dateTime64ToSnowflakeID dateTimeToSnowflakeID dateTimeToUUIDv7 dateTrunc DAY DAYOFMONTH
    DAYOFWEEK DAYOFYEAR decodeHTMLComponent decodeXMLComponent degrees divide divideDecimal
    divideOrNull dotProduct dynamicElement dynamicType e editDistance editDistanceUTF8 empty
    emptyArrayDate emptyArrayDateTime emptyArrayFloat32 emptyArrayFloat64 emptyArrayInt16
    emptyArrayInt32 emptyArrayInt64 emptyArrayInt8 emptyArrayString emptyArrayToSingle
    emptyArrayUInt16 emptyArrayUInt32 emptyArrayUInt64 emptyArrayUInt8 encodeXMLComponent
    endsWith endsWithCaseInsensitive endsWithCaseInsensitiveUTF8 endsWithUTF8 equals erf erfc
    exp exp10 exp2 extract extractAll extractAllGroups extractAllGroupsHorizontal
    extractAllGroupsVertical extractGroups extractKeyValuePairs extractKeyValuePairsWithEscaping
    extractTextFromHTML factorial farmFingerprint64 farmHash64 finalizeAggregation firstLine
    firstNonDefault flatten flattenTuple floor format FORMAT_BYTES formatDateTime
    formatDateTimeInJodaSyntax formatReadableDecimalSize formatReadableQuantity
    formatReadableSize formatReadableTimeDelta formatRow formatRowNoNewline FROM_BASE64
    FROM_DAYS FROM_UNIXTIME from_utc_timestamp fromDaysSinceYearZero fromDaysSinceYearZero32
    fromModifiedJulianDay fromModifiedJulianDayOrNull fromUnixTimestamp fromUnixTimestamp64Micro
    fromUnixTimestamp64Milli fromUnixTimestamp64Nano fromUnixTimestamp64Second
    fromUnixTimestampInJodaSyntax fromUTCTimestamp fuzzBits gccMurmurHash gcd
    generateSnowflakeID generateUUIDv4 generateUUIDv7 globalIn globalInIgnoreSet globalNotIn
    globalNotInIgnoreSet globalNotNullIn globalNotNullInIgnoreSet globalNullIn
    globalNullInIgnoreSet greater greaterOrEquals greatest halfMD5 has hasAll hasAllToken
    hasAllTokens hasAny hasAnyToken hasAnyTokens hasPhrase hasSubsequence
    hasSubsequenceCaseInsensitive hasSubsequenceCaseInsensitiveUTF8 hasSubsequenceUTF8 hasSubstr
    hasToken hasTokenCaseInsensitive hasTokenCaseInsensitiveOrNull hasTokenOrNull hex highlight
    hilbertDecode hilbertEncode hiveHash HOUR hypot icebergHash identity if ifNotFinite ifNull
    ignore ilike in indexOf indexOfAssumeSorted inIgnoreSet initcap initcapUTF8
    initializeAggregation instr intDiv intDivOrNull intDivOrZero intExp10 intExp2 intHash32
    intHash64 isASCII isConstant isDistinctFrom isDynamicElementInSharedData isFinite isInfinite
    isNaN isNotDistinctFrom isNotNull isNull isNullable isPrime isProbablePrime isValidASCII
    isValidJSON isValidUTF8 isZeroOrNull jaroSimilarity jaroWinklerSimilarity javaHash
    javaHashUTF16LE JSON_ARRAY_LENGTH JSON_EXISTS JSON_QUERY JSON_VALUE JSONAllPaths
    JSONAllPathsWithTypes JSONAllValues JSONArrayLength JSONDynamicPaths
    JSONDynamicPathsWithTypes JSONExtract JSONExtractArrayRaw JSONExtractArrayRawCaseInsensitive
    JSONExtractBool JSONExtractBoolCaseInsensitive JSONExtractCaseInsensitive JSONExtractFloat
    JSONExtractFloatCaseInsensitive JSONExtractInt JSONExtractIntCaseInsensitive JSONExtractKeys
    JSONExtractKeysAndValues JSONExtractKeysAndValuesCaseInsensitive JSONExtractKeysAndValuesRaw
    JSONExtractKeysAndValuesRawCaseInsensitive JSONExtractKeysCaseInsensitive JSONExtractRaw
    JSONExtractRawCaseInsensitive JSONExtractString JSONExtractStringCaseInsensitive
    JSONExtractUInt JSONExtractUIntCaseInsensitive JSONHas JSONKey JSONLength JSONMergePatch
    jsonMergePatch JSONSharedDataPaths JSONSharedDataPathsWithTypes JSONType jumpConsistentHash
    kafkaMurmurHash keccak256 kostikConsistentHash kqlBin kqlBinAt kqlDateTimeBinAt kqlDivide
    kqlMultiply kqlParameterCast kqlRangeCount kqlToTimespan LAST_DAY lcase lcm least left
    leftPad leftPadUTF8 leftUTF8 length lengthUTF8 less lessOrEquals levenshteinDistance
    levenshteinDistanceUTF8 lgamma like ln localtime localtimestamp locate log log10 log1p log2
    lower lowerUTF8 lpad ltrim makeDate makeDate32 makeDateTime makeDateTime64 map
    MAP_FROM_ARRAYS mapAdd mapAll mapApply mapConcat mapContains mapContainsKey
    mapContainsKeyLike mapContainsValue mapContainsValueLike mapExists mapExtractKeyLike
    mapExtractValueLike mapFilter mapFromArrays mapFromString mapKeys mapPartialReverseSort
    mapPartialSort mapPopulateSeries mapReverseSort mapSort mapSubtract mapUpdate mapValues
    match matchCaseInsensitive matchPhrase materialize max2 MD4 MD5 metroHash64 MICROSECOND mid
    midpoint MILLISECOND min2 minus MINUTE mismatches mod modOrNull modulo moduloLegacy
    moduloOrNull moduloOrZero MONTH monthName mortonDecode mortonEncode
    multiFuzzyMatchAllIndices multiFuzzyMatchAny multiFuzzyMatchAnyIndex multiIf
    multiMatchAllIndices multiMatchAny multiMatchAnyIndex multiply multiplyDecimal
    multiSearchAllPositions multiSearchAllPositionsCaseInsensitive
    multiSearchAllPositionsCaseInsensitiveUTF8 multiSearchAllPositionsUTF8 multiSearchAny
    multiSearchAnyCaseInsensitive multiSearchAnyCaseInsensitiveUTF8 multiSearchAnyUTF8
    multiSearchFirstIndex multiSearchFirstIndexCaseInsensitive
    multiSearchFirstIndexCaseInsensitiveUTF8 multiSearchFirstIndexUTF8 multiSearchFirstPosition
    multiSearchFirstPositionCaseInsensitive multiSearchFirstPositionCaseInsensitiveUTF8
    multiSearchFirstPositionUTF8 murmurHash2_32 murmurHash2_64 murmurHash3_128 murmurHash3_32
    murmurHash3_64 naiveBayesNgrams NANOSECOND NATURAL_SORT_KEY naturalSortKey negate neighbor
    ngramDistance ngramDistanceCaseInsensitive ngramDistanceCaseInsensitiveUTF8
    ngramDistanceUTF8 ngramMinHash ngramMinHashArg ngramMinHashArgCaseInsensitive
    ngramMinHashArgCaseInsensitiveUTF8 ngramMinHashArgUTF8 ngramMinHashCaseInsensitive
    ngramMinHashCaseInsensitiveUTF8 ngramMinHashUTF8 ngrams ngramSearch
    ngramSearchCaseInsensitive ngramSearchCaseInsensitiveUTF8 ngramSearchUTF8 ngramSimHash
    ngramSimHashCaseInsensitive ngramSimHashCaseInsensitiveUTF8 ngramSimHashUTF8
    normalizeUTF8NFC normalizeUTF8NFD normalizeUTF8NFKC normalizeUTF8NFKCCasefold
    normalizeUTF8NFKD not notEmpty notEquals notHas notILike notIn notInIgnoreSet notLike
    notMatch notMatchCaseInsensitive notNullIn notNullInIgnoreSet now now64 nowInBlock
    nowInBlock64 nullIf nullIn nullInIgnoreSet OCTET_LENGTH or overlay overlayUTF8 parseDateTime
    parseDateTime32BestEffort parseDateTime32BestEffortOrNull parseDateTime32BestEffortOrZero
    parseDateTime64 parseDateTime64BestEffort parseDateTime64BestEffortOrNull
    parseDateTime64BestEffortOrZero parseDateTime64BestEffortUS
    parseDateTime64BestEffortUSOrNull parseDateTime64BestEffortUSOrZero
    parseDateTime64InJodaSyntax parseDateTime64InJodaSyntaxOrNull
    parseDateTime64InJodaSyntaxOrZero parseDateTime64OrNull parseDateTime64OrZero
    parseDateTimeBestEffort parseDateTimeBestEffortOrNull parseDateTimeBestEffortOrZero
    parseDateTimeBestEffortUS parseDateTimeBestEffortUSOrNull parseDateTimeBestEffortUSOrZero
    parseDateTimeInJodaSyntax parseDateTimeInJodaSyntaxOrNull parseDateTimeInJodaSyntaxOrZero
    parseDateTimeOrNull parseDateTimeOrZero parseReadableSize parseReadableSizeOrNull
    parseReadableSizeOrZero parseTimeDelta pi plus pmod pmodOrNull position
    positionCaseInsensitive positionCaseInsensitiveUTF8 positionUTF8 positive_modulo
    positive_modulo_or_null positiveModulo positiveModuloOrNull pow power prettyPrintJSON printf
    proportionsZTest QUARTER radians rand rand32 rand64 randBernoulli randBinomial randCanonical
    randChiSquared randConstant randExponential randFisherF randLogNormal randNegativeBinomial
    randNormal randomFixedString randomHadamardTransform randomPrintableASCII randomString
    randomStringUTF8 randPoisson randStudentT randUniform range REGEXP_EXTRACT regexp_instr
    REGEXP_MATCHES REGEXP_REPLACE REGEXP_SUBSTR regexpExtract regexpInstr regexpPosition
    regexpQuoteMeta reinterpret reinterpretAsDate reinterpretAsDateTime reinterpretAsFixedString
    reinterpretAsFloat32 reinterpretAsFloat64 reinterpretAsInt128 reinterpretAsInt16
    reinterpretAsInt256 reinterpretAsInt32 reinterpretAsInt64 reinterpretAsInt8
    reinterpretAsString reinterpretAsUInt128 reinterpretAsUInt16 reinterpretAsUInt256
    reinterpretAsUInt32 reinterpretAsUInt64 reinterpretAsUInt8 reinterpretAsUUID
    removeAccentsUTF8 removeDiacriticsUTF8 repeat replace replaceAll replaceOne replaceRegexpAll
    replaceRegexpOne replicate reverse reverseBySeparator reverseUTF8 right rightPad
    rightPadUTF8 rightUTF8 RIPEMD160 round roundAge roundBankers roundDown roundDuration
    roundToExp2 rpad rtrim runningAccumulate runningDifference
    runningDifferenceStartingWithFirstValue scalarProduct SECOND serverTimeZone serverTimezone
    SHA1 SHA224 SHA256 SHA384 SHA512 SHA512_256 sigmoid sign simpleJSONExtractBool
    simpleJSONExtractFloat simpleJSONExtractInt simpleJSONExtractRaw simpleJSONExtractString
    simpleJSONExtractUInt simpleJSONHas sin sinh sipHash128 sipHash128Keyed sipHash128Reference
    sipHash128ReferenceKeyed sipHash64 sipHash64Keyed snowflakeIDToDateTime
    snowflakeIDToDateTime64 soundex space sparseGrams sparseGramsHashes sparseGramsHashesUTF8
    sparseGramsUTF8 splitByAlpha splitByChar splitByNonAlpha splitByRegexp splitByString
    splitByWhitespace sqid sqidDecode sqidEncode sqr sqrt startsWith startsWithCaseInsensitive
    startsWithCaseInsensitiveUTF8 startsWithUTF8 str_to_date str_to_map stringBytesEntropy
    stringBytesUniq stringJaccardIndex stringJaccardIndexUTF8 subDate substr substring
    SUBSTRING_INDEX substringIndex substringIndexUTF8 substringUTF8 subtractDays subtractHours
    subtractInterval subtractMicroseconds subtractMilliseconds subtractMinutes subtractMonths
    subtractNanoseconds subtractQuarters subtractSeconds subtractTupleOfIntervals subtractWeeks
    subtractYears tan tanh tgamma throwIf time_bucket timeDiff timeSlot timeSlots timestamp
    TIMESTAMP_DIFF timestamp_diff timestampDiff timeZone timezone timeZoneOf timezoneOf
    timeZoneOffset timezoneOffset TO_BASE64 TO_DAYS TO_UNIXTIME to_utc_timestamp toBFloat16
    toBFloat16OrNull toBFloat16OrZero toBool toColumnTypeName toDate toDate32 toDate32OrDefault
    toDate32OrNull toDate32OrZero toDateOrDefault toDateOrNull toDateOrZero toDateTime
    toDateTime32 toDateTime64 toDateTime64OrDefault toDateTime64OrNull toDateTime64OrZero
    toDateTimeOrDefault toDateTimeOrNull toDateTimeOrZero today toDayOfMonth toDayOfWeek
    toDayOfYear toDaysInMonth toDaysSinceYearZero toDecimal128 toDecimal128OrDefault
    toDecimal128OrNull toDecimal128OrZero toDecimal256 toDecimal256OrDefault toDecimal256OrNull
    toDecimal256OrZero toDecimal32 toDecimal32OrDefault toDecimal32OrNull toDecimal32OrZero
    toDecimal64 toDecimal64OrDefault toDecimal64OrNull toDecimal64OrZero toDecimalString
    toFixedString toFloat32 toFloat32OrDefault toFloat32OrNull toFloat32OrZero toFloat64
    toFloat64OrDefault toFloat64OrNull toFloat64OrZero toHour toInt128 toInt128OrDefault
    toInt128OrNull toInt128OrZero toInt16 toInt16OrDefault toInt16OrNull toInt16OrZero toInt256
    toInt256OrDefault toInt256OrNull toInt256OrZero toInt32 toInt32OrDefault toInt32OrNull
    toInt32OrZero toInt64 toInt64OrDefault toInt64OrNull toInt64OrZero toInt8 toInt8OrDefault
    toInt8OrNull toInt8OrZero toInterval toIntervalDay toIntervalHour toIntervalMicrosecond
    toIntervalMillisecond toIntervalMinute toIntervalMonth toIntervalNanosecond
    toIntervalQuarter toIntervalSecond toIntervalWeek toIntervalYear toISOWeek toISOYear
    toJSONString tokens tokensForLikePattern toLastDayOfMonth toLastDayOfWeek toLowCardinality
    toMicrosecond toMillisecond toMinute toModifiedJulianDay toModifiedJulianDayOrNull toMonday
    toMonth toMonthNumSinceEpoch toNanosecond toNullable toQuarter toRelativeDayNum
    toRelativeHourNum toRelativeMinuteNum toRelativeMonthNum toRelativeQuarterNum
    toRelativeSecondNum toRelativeWeekNum toRelativeYearNum toSecond toStartOfDay
    toStartOfFifteenMinutes toStartOfFiveMinute toStartOfFiveMinutes toStartOfHour
    toStartOfInterval toStartOfISOYear toStartOfMicrosecond toStartOfMillisecond toStartOfMinute
    toStartOfMonth toStartOfNanosecond toStartOfQuarter toStartOfSecond toStartOfTenMinutes
    toStartOfWeek toStartOfYear toString toStringCutToZero toTime toTime64 toTime64OrNull
    toTime64OrZero toTimeOrNull toTimeOrZero toTimeWithFixedDate toTimeZone toTimezone
    toTypeName toUInt128 toUInt128OrDefault toUInt128OrNull toUInt128OrZero toUInt16
    toUInt16OrDefault toUInt16OrNull toUInt16OrZero toUInt256 toUInt256OrDefault toUInt256OrNull
    toUInt256OrZero toUInt32 toUInt32OrDefault toUInt32OrNull toUInt32OrZero toUInt64
    toUInt64OrDefault toUInt64OrNull toUInt64OrZero toUInt8 toUInt8OrDefault toUInt8OrNull
    toUInt8OrZero toUnixTimestamp toUnixTimestamp64Micro toUnixTimestamp64Milli
    toUnixTimestamp64Nano toUnixTimestamp64Second toUTCTimestamp toUUID toUUIDOrDefault
    toUUIDOrNull toUUIDOrZero toValidUTF8 toWeek toYear toYearNumSinceEpoch toYearWeek toYYYYMM
    toYYYYMMDD toYYYYMMDDhhmmss transform translate translateUTF8 trim trimBoth trimLeft
    trimRight trunc truncate tryBase32Decode tryBase58Decode tryBase64Decode tryBase64URLDecode
    tuple tupleConcat tupleDivide tupleDivideByNumber tupleElement tupleHammingDistance
    tupleIntDiv tupleIntDivByNumber tupleIntDivOrZero tupleIntDivOrZeroByNumber tupleMinus
    tupleModulo tupleModuloByNumber tupleMultiply tupleMultiplyByNumber tupleNames tupleNegate
    tuplePlus tuplePositiveModuloByNumber tupleToNameValuePairs ucase unbin unhex unnest upper
    upperUTF8 URLHash UTC_timestamp UTCTimestamp UUIDNumToString UUIDStringToNum UUIDToNum
    UUIDv7ToDateTime vectorDifference vectorSum visibleWidth visitParamExtractBool
    visitParamExtractFloat visitParamExtractInt visitParamExtractRaw visitParamExtractString
    visitParamExtractUInt visitParamHas week width_bucket widthBucket wordShingleMinHash
    wordShingleMinHashArg wordShingleMinHashArgCaseInsensitive
    wordShingleMinHashArgCaseInsensitiveUTF8 wordShingleMinHashArgUTF8
    wordShingleMinHashCaseInsensitive wordShingleMinHashCaseInsensitiveUTF8
    wordShingleMinHashUTF8 wordShingleSimHash wordShingleSimHashCaseInsensitive
    wordShingleSimHashCaseInsensitiveUTF8 wordShingleSimHashUTF8 wyHash64 xor xxh3 xxh3_128
    xxHash32 xxHash64 xxHash64Spark yandexConsistentHash YEAR yearweek yesterday
    YYYYMMDDhhmmssToDateTime YYYYMMDDhhmmssToDateTime64 YYYYMMDDToDate YYYYMMDDToDate32
    """
)


AGGREGATES = _names(
    """
    aggThrow analysisOfVariance anova any any_respect_nulls any_value any_value_respect_nulls
    anyHeavy anyLast anyLast_respect_nulls anyLastRespectNulls anyRespectNulls
    anyValueRespectNulls approx_top_count approx_top_k approx_top_sum argAndMax argAndMin argMax
    argMin array_agg avg avgWeighted BIT_AND BIT_OR BIT_XOR boundingRatio
    categoricalInformationValue contingency corr corrMatrix corrStable count COVAR_POP
    COVAR_SAMP covarPop covarPopMatrix covarPopStable covarSamp covarSampMatrix covarSampStable
    cramersV cramersVBiasCorrected cume_dist deltaSum deltaSumTimestamp dense_rank denseRank
    distinctDynamicTypes distinctJSONPaths distinctJSONPathsAndTypes entropy
    estimateCompressionRatio exponentialMovingAverage exponentialTimeDecayedAvg
    exponentialTimeDecayedCount exponentialTimeDecayedMax exponentialTimeDecayedSum first_value
    first_value_respect_nulls firstValueRespectNulls flameGraph gini group_concat groupArray
    groupArrayInsertAt groupArrayIntersect groupArrayLast groupArrayMovingAvg
    groupArrayMovingSum groupArraySample groupArraySorted groupBitAnd groupBitmap groupBitmapAnd
    groupBitmapOr groupBitmapXor groupBitOr groupBitXor groupConcat groupFormat
    groupNumericIndexedVector groupUniqArray histogram intervalLengthSum kolmogorovSmirnovTest
    kurtPop kurtSamp lag lagInFrame largestTriangleThreeBuckets last_value
    last_value_respect_nulls lastValueRespectNulls lead leadInFrame lttb mannWhitneyUTest max
    max_by maxIntersections maxIntersectionsPosition maxMappedArrays meanZTest median
    medianBFloat16 medianBFloat16Weighted medianDD medianDeterministic medianExact
    medianExactHigh medianExactLow medianExactWeighted medianExactWeightedInterpolated medianGK
    medianInterpolatedWeighted medianTDigest medianTDigestWeighted medianTiming
    medianTimingWeighted mergedJSONPatch min min_by minMappedArrays nonNegativeDerivative
    nothing nothingNull nothingUInt64 nth_value ntile percent_rank percentRank quantile
    quantileBFloat16 quantileBFloat16Weighted quantileDD quantileDeterministic quantileExact
    quantileExactExclusive quantileExactHigh quantileExactInclusive quantileExactLow
    quantileExactWeighted quantileExactWeightedInterpolated quantileGK
    quantileInterpolatedWeighted quantilePrometheusHistogram quantiles quantilesBFloat16
    quantilesBFloat16Weighted quantilesDD quantilesDeterministic quantilesExact
    quantilesExactExclusive quantilesExactHigh quantilesExactInclusive quantilesExactLow
    quantilesExactWeighted quantilesExactWeightedInterpolated quantilesGK
    quantilesInterpolatedWeighted quantilesPrometheusHistogram quantilesTDigest
    quantilesTDigestWeighted quantilesTiming quantilesTimingWeighted quantileTDigest
    quantileTDigestWeighted quantileTiming quantileTimingWeighted rank rankCorr regr_avgx
    regr_avgy regr_count regr_intercept regr_r2 regr_slope regr_sxx regr_sxy regr_syy retention
    row_number sequenceCount sequenceMatch sequenceMatchEvents sequenceNextNode
    simpleLinearRegression singleValueOrNull skewPop skewSamp sparkBar sparkbar STD STDDEV
    STDDEV_POP STDDEV_SAMP stddevPop stddevPopStable stddevSamp stddevSampStable string_agg
    studentTTest studentTTestOneSample sum sumCount sumKahan sumMapFiltered
    sumMapFilteredWithOverflow sumMappedArrays sumMapWithOverflow sumWithOverflow theilsU
    timeSeriesAvgToGrid timeSeriesBottomKMasks timeSeriesChangesToGrid timeSeriesCountToGrid
    timeSeriesDeltaToGrid timeSeriesDerivToGrid timeSeriesGroupArray timeSeriesIncreaseToGrid
    timeSeriesInstantDeltaToGrid timeSeriesInstantRateToGrid timeSeriesLastToGrid
    timeSeriesLastTwoSamples timeSeriesLimitKMasks timeSeriesMaxToGrid timeSeriesMinToGrid
    timeSeriesPredictLinearToGrid timeSeriesRateToGrid timeSeriesResampleToGridWithStaleness
    timeSeriesResetsToGrid timeSeriesSumToGrid timeSeriesTimestampOfMaxToGrid
    timeSeriesTimestampOfMinToGrid timeSeriesTopKMasks topK topKWeighted uniq uniqCombined
    uniqCombined64 uniqExact uniqHLL12 uniqUpTo VAR_POP VAR_SAMP varPop varPopStable varSamp
    varSampStable welchTTest windowFunnel
    """
)


_SUFFIXES = tuple(c.lower() for c in COMBINATORS)


def allowed_function(name: str) -> bool:
    """Whether ``name`` is a listed function, or a listed aggregate with combinators."""
    low = name.lower()
    return low in FUNCTIONS or low in _SYNTAX or _aggregate(low)


def _aggregate(low: str) -> bool:
    """``low`` is a listed aggregate followed by combinators (``avgifornull``)."""
    if low in AGGREGATES:
        return True
    return any(
        low.endswith(suffix) and len(low) > len(suffix) and _aggregate(low[: -len(suffix)])
        for suffix in _SUFFIXES
    )
