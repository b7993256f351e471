package org.clusterforge.analysis.smartcn;

import java.util.Map;
import java.util.Set;
import org.apache.lucene.analysis.CharArraySet;
import org.apache.lucene.analysis.StopFilter;
import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.cn.smart.SmartChineseAnalyzer;
import org.apache.lucene.search.suggest.analyzing.SuggestStopFilter;
import org.opensearch.common.settings.Settings;
import org.opensearch.env.Environment;
import org.opensearch.index.IndexSettings;
import org.opensearch.index.analysis.AbstractTokenFilterFactory;
import org.opensearch.index.analysis.Analysis;

/**
 * Removes stop words. Settings, as in the official plugin: {@code stopwords} (a list, or the
 * named list {@code _smartcn_}, the default) or {@code stopwords_path}, {@code ignore_case}
 * (default false) and {@code remove_trailing} (default true; false keeps a trailing stop word,
 * which suggesters need while the user is still typing).
 */
public final class SmartcnStopTokenFilterFactory extends AbstractTokenFilterFactory {

    /** The only named list this filter knows; any other list is given word by word. */
    public static final String SMARTCN_STOP_WORDS = "_smartcn_";

    private static final Map<String, Set<?>> NAMED_STOP_WORDS =
            Map.of(SMARTCN_STOP_WORDS, SmartChineseAnalyzer.getDefaultStopSet());

    private final CharArraySet stopWords;
    private final boolean removeTrailing;

    public SmartcnStopTokenFilterFactory(
            IndexSettings indexSettings, Environment environment, String name, Settings settings) {
        super(indexSettings, name, settings);
        boolean ignoreCase = settings.getAsBoolean("ignore_case", false);
        this.removeTrailing = settings.getAsBoolean("remove_trailing", true);
        this.stopWords = Analysis.parseWords(
                environment,
                settings,
                "stopwords",
                SmartChineseAnalyzer.getDefaultStopSet(),
                NAMED_STOP_WORDS,
                ignoreCase);
    }

    @Override
    public TokenStream create(TokenStream tokenStream) {
        if (removeTrailing) {
            return new StopFilter(tokenStream, stopWords);
        }
        return new SuggestStopFilter(tokenStream, stopWords);
    }
}
